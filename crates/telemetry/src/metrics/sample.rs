//! Reading a scrape back: what tests and tools do with `/metrics` text.

/// The value of the series `name` whose labels include `labels` (in any order) in a scrape
/// `text`, if there is one: what tests and tools read back from `/metrics`. (Label values
/// holding `,` or `"` are not told apart; ours never do.)
pub fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines().find_map(|line| {
        if line.starts_with('#') {
            return None;
        }
        let (key, value) = line.rsplit_once(' ')?;
        let (metric, found) = match key.split_once('{') {
            Some((metric, rest)) => (metric, rest.strip_suffix('}')?),
            None => (key, ""),
        };
        let wanted = |(k, v): &(&str, &str)| {
            found.split(',').any(|pair| {
                pair.strip_prefix(k).and_then(|p| p.strip_prefix('=')) == Some(&format!("\"{v}\""))
            })
        };
        (metric == name && labels.iter().all(wanted))
            .then(|| value.parse().ok())
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::sample;

    #[test]
    fn a_sample_is_found_by_name_and_labels_in_any_order() {
        let text = "# TYPE shardsched_jobs gauge\n\
                    shardsched_jobs{state=\"running\",queue=\"batch\"} 3\n\
                    shardsched_jobs{state=\"pending\",queue=\"batch\"} 1\n\
                    shardsched_moves_in_flight 2\n";
        let running = [("queue", "batch"), ("state", "running")];
        assert_eq!(sample(text, "shardsched_jobs", &running), Some(3.0));
        assert_eq!(sample(text, "shardsched_moves_in_flight", &[]), Some(2.0));
        assert_eq!(sample(text, "shardsched_jobs", &[("queue", "debug")]), None);
        assert_eq!(sample(text, "shardsched_job", &[]), None);
    }
}
