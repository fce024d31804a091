fn main() -> std::process::ExitCode {
    tern::cli::main()
}
