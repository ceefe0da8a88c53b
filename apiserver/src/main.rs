//! `hns-apiserver`: the aggregated API server, hierarchy controller and admission webhook of hns.

use clap::Parser;
use hns_apiserver::options::Args;

#[actix_web::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    args.init_logging();
    args.run().await
}
