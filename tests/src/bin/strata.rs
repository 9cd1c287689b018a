//! The real `strata` binary, built inside this crate so black-box tests can find it through
//! `env!("CARGO_BIN_EXE_strata")`.

fn main() -> std::process::ExitCode {
    strata_server::cli::main()
}
