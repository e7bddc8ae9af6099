//! Writes a synthetic benchmark repo to a directory, for end-to-end runs of the CLI:
//! `cargo run --release -p flotilla-core --example generate-repo -- L /tmp/repo-L`.

#[path = "../benches/support/generate.rs"]
mod generate;

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(size), Some(dir)) = (args.next(), args.next()) else {
        eprintln!("usage: generate-repo S|M|L|<templates>x<clusters> DIR");
        std::process::exit(2);
    };
    let (templates, clusters) = match generate::SIZES.iter().find(|(name, _, _)| *name == size) {
        Some((_, t, c)) => (*t, *c),
        None => {
            let (t, c) = size.split_once('x').expect("size is S, M, L or <templates>x<clusters>");
            (t.parse().expect("templates"), c.parse().expect("clusters"))
        }
    };
    for (path, content) in generate::generate(templates, clusters) {
        let file = std::path::Path::new(&dir).join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, content).unwrap();
    }
}
