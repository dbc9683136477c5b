//! The `shardsched` binary: everything it does is in the CLI library (crates/cli).

fn main() -> std::process::ExitCode {
    shardsched_cli::main()
}
