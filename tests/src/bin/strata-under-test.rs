//! The real `strata` binary, built inside this crate so black-box tests can find it through
//! `env!("CARGO_BIN_EXE_strata-under-test")`; the name differs from the server's own `strata`
//! so the two do not collide in `target/`.

fn main() -> std::process::ExitCode {
    strata_server::cli::main()
}
