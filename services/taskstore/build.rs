// `sqlx::migrate!` embeds the migrations at compile time; a new migration
// file must trigger a rebuild even when no Rust file changed.
fn main() {
    println!("cargo:rerun-if-changed=../../migrations");
}
