//! How hns watches kube-apiserver: long watches, kept honest by bookmarks.
//!
//! At idle, a watch costs one request each time it ends and is opened again. kube-rs asks for
//! 290-second watches by default, which for hns's dozen watches was some 2.5 requests a minute
//! per replica doing nothing. hns asks for [`TIMEOUT_SECONDS`] instead (the longest watch
//! kube-apiserver gives clients that name none, twice its `--min-request-timeout`).
//!
//! A long watch must not hide a dead connection. kube-apiserver sends a bookmark to every watch
//! that allows them about once a minute (kube-rs's watcher does), so a connection that brings
//! nothing for [`READ_TIMEOUT`] is dead: the client's read timeout ends it and the watcher opens
//! a new one, as it would at the watch's end.

use std::time::Duration;

use futures::stream::BoxStream;
use futures::StreamExt;
use kube::runtime::{watcher, WatchStreamExt};
use kube::Api;

/// How long each watch lasts before kube-apiserver ends it (and hns opens the next).
pub const TIMEOUT_SECONDS: u32 = 60 * 60;

/// How long a connection may bring nothing, not even a bookmark, before it counts as dead:
/// three bookmarks missed.
pub const READ_TIMEOUT: Duration = Duration::from_secs(3 * 60);

/// A watcher configuration with hns's long timeout; add selectors to it.
pub fn config() -> watcher::Config {
    watcher::Config::default().timeout(TIMEOUT_SECONDS)
}

/// Something happened to the object `name` of `api` (or its watch began again): for the tasks
/// that keep one named object as hns wants it and act only when it changes.
pub fn by_name<K>(api: Api<K>, name: &str) -> BoxStream<'static, ()>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let config = config().fields(&format!("metadata.name={name}"));
    watcher::watcher(api, config).default_backoff().map(|_| ()).boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watches_outlast_several_bookmarks_and_the_read_timeout() {
        let config = config();
        assert_eq!(config.timeout, Some(TIMEOUT_SECONDS));
        assert!(config.bookmarks, "bookmarks keep a long watch's connection reading");
        assert!(Duration::from_secs(u64::from(TIMEOUT_SECONDS)) > READ_TIMEOUT);
    }
}
