//! Generates the client from the checked-in contract at build time, so the client can never
//! drift from `openapi/openapi.json`: change the document and this crate follows (or stops
//! compiling, which CI sees).

#[path = "build/downconvert.rs"]
mod downconvert;

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let contract = manifest_dir.join("../../openapi/openapi.json");
    println!("cargo:rerun-if-changed={}", contract.display());
    println!("cargo:rerun-if-changed=build/downconvert.rs");

    let mut document: serde_json::Value = serde_json::from_slice(&std::fs::read(&contract)?)?;
    downconvert::to_openapi_30(&mut document);
    let spec: openapiv3::OpenAPI = serde_json::from_value(document)?;

    let mut settings = progenitor::GenerationSettings::default();
    settings.with_interface(progenitor::InterfaceStyle::Builder);
    let mut generator = progenitor::Generator::new(&settings);
    let tokens = generator.generate_tokens(&spec)?;
    let code = prettyplease::unparse(&syn::parse2(tokens)?);

    let out = PathBuf::from(std::env::var("OUT_DIR")?).join("codegen.rs");
    std::fs::write(out, code)?;
    Ok(())
}
