//! `hns-apiserver`: the aggregated API server, hierarchy controller and admission webhook of hns.

use clap::Parser;
use hns_apiserver::options::Args;

// jemalloc hands freed memory back to the system; with glibc's allocator the peak of one large
// LIST (10,000 objects serialized) stayed in the resident set for good. It also serves OpenSSL's
// allocations (the crate's `unprefixed_malloc_on_supported_platforms` replaces `malloc`), whose
// per-connection buffers, under glibc, kept ~100 MiB resident after thousands of watches ended.
// Its settings come from `MALLOC_CONF` (config/default/deployment.yaml).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    args.init_logging();
    hns_apiserver::app::run(args).await
}
