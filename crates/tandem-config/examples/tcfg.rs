//! A tiny driver for trying the language by hand: `tcfg validate FILE...` or
//! `tcfg resolve FILE [--set P=V]... [--json] [--hash]`.
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = args.first() else {
        eprintln!("usage: tcfg validate|resolve ...");
        std::process::exit(2);
    };
    let rest = &args[1..];
    let json = rest.iter().any(|a| a == "--json");
    let hash = rest.iter().any(|a| a == "--hash");
    let mut files = Vec::new();
    let mut sets = Vec::new();
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--json" | "--hash" => {}
            "--set" => sets.extend(it.next().cloned()),
            other => files.push(other.to_string()),
        }
    }
    let code = if cmd == "validate" {
        let (out, code) = tandem_config::cli::validate(&files, json, false);
        print!("{out}");
        code
    } else {
        let (out, err, code) =
            tandem_config::cli::resolve(files.first().map_or("-", |f| f), &sets, json, hash, false);
        print!("{out}");
        eprint!("{err}");
        code
    };
    std::process::exit(code);
}
