//! The `strata` binary: everything is in [`strata_server::cli`].

fn main() -> std::process::ExitCode {
    strata_server::cli::main()
}
