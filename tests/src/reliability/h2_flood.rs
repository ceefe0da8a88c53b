//! An HTTP/2 flood of empty DATA frames, the attack of RUSTSEC-2026-0258 on the h2 crate (each
//! empty frame cost its receiver memory it never gave back). hns-apiserver speaks HTTP/1.1 only,
//! so the flood must be refused at its first line and leave hns's memory where it was, whatever
//! the client offers in ALPN or sends without asking.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use super::processes::Processes;
use crate::Local;

/// Connections flooding at once.
const CONNECTIONS: usize = 8;
/// How long each keeps sending, at most.
const FLOOD_FOR: Duration = Duration::from_secs(5);

/// What the flood did.
pub struct Flood {
    /// Connections on which hns agreed to HTTP/2 (ALPN `h2`).
    pub h2_agreed: usize,
    /// Bytes the client wrote before its connections ended (hns stops reading at the preface's
    /// request line; the rest filled socket buffers).
    pub bytes_taken: usize,
    /// Peak resident memory of the replica during the flood, above where it started.
    pub peak_growth_mib: Option<f64>,
}

/// The client's connection preface, an empty SETTINGS frame, a HEADERS frame opening stream 1
/// (POST https /, all from HPACK's static table), then empty DATA frames on it.
fn frames() -> (Vec<u8>, Vec<u8>) {
    let frame = |kind: u8, flags: u8, stream: u32, payload: &[u8]| {
        let len = payload.len() as u32;
        let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    };
    let mut opening = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    opening.extend(frame(4, 0, 0, &[]));
    opening.extend(frame(1, 0x4, 1, &[0x83, 0x87, 0x84]));
    let empty_data: Vec<u8> = (0..7_000).flat_map(|_| frame(0, 0, 1, &[])).collect();
    (opening, empty_data)
}

/// One connection offering `h2` first, flooding until hns closes it or the time is up; returns
/// whether hns agreed to HTTP/2 and how many bytes it took.
fn flood_one(local: &Local) -> (bool, usize) {
    let mut tls = local.front_proxy_connection(b"\x02h2\x08http/1.1");
    let agreed = tls.ssl().selected_alpn_protocol() == Some(&b"h2"[..]);
    let (opening, empty_data) = frames();
    let mut taken = 0;
    if tls.write_all(&opening).is_ok() {
        taken += opening.len();
        let started = Instant::now();
        while started.elapsed() < FLOOD_FOR && tls.write_all(&empty_data).is_ok() {
            taken += empty_data.len();
        }
    }
    // Whatever hns answered (a 400 for the preface's request line), read until it closes.
    let _ = tls.get_ref().set_read_timeout(Some(Duration::from_secs(5)));
    let _ = tls.read_to_end(&mut Vec::new());
    (agreed, taken)
}

/// Floods `replica` (replica 0 of `local`) from `CONNECTIONS` connections at once.
pub async fn run(local: &Local, processes: &Processes, replica: &str) -> Flood {
    let measured = processes.reset_peak_rss(replica);
    let start = processes.rss_mib(replica);
    let floods: Vec<_> = (0..CONNECTIONS)
        .map(|_| {
            let local = local.clone();
            tokio::task::spawn_blocking(move || flood_one(&local))
        })
        .collect();
    let (mut h2_agreed, mut bytes_taken) = (0, 0);
    for flood in floods {
        let (agreed, taken) = flood.await.expect("a flooding connection");
        h2_agreed += usize::from(agreed);
        bytes_taken += taken;
    }
    let peak = processes.peak_rss_mib(replica);
    let peak_growth_mib = match (measured, start, peak) {
        (true, Some(s), Some(p)) => Some(p - s),
        _ => None,
    };
    Flood { h2_agreed, bytes_taken, peak_growth_mib }
}
