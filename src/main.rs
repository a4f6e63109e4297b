//! The `tandem` command line: parses arguments and hands each subcommand to the library.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "tandem",
    about = "Data-parallel reinforcement learning experiments declared in KDL",
    disable_version_flag = true
)]
struct Cli {
    /// Print the version, the libtorch version, the collective backends and CUDA availability.
    #[arg(short = 'V', long = "version")]
    version: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.version {
        print!("{}", tandem::version::report());
        return ExitCode::SUCCESS;
    }
    match cli.command {
        None => {
            eprintln!("tandem: nothing to do; see `tandem --help`");
            ExitCode::from(2)
        }
    }
}
