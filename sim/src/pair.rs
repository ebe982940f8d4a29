//! Two endpoints on one Ethernet link through their [`Endpoint`]s: golden model against golden model, or the
//! model against an RTL endpoint.
//!
//! Each side is a device for the application (the verbs) and an [`Endpoint`] for the link, as in an rxe run
//! ([`crate::rxe::verbs::open_endpoint_with`]); [`Wire`] is the cable: a thread that moves every frame one
//! side emits to the other. The model is event driven (its timers run on the wire's clock, ns since the wire
//! started). Two RTL RNICs do not need it: [`crate::rxe::rtl_ep::RtlDevice::pair`] steps both in lockstep in
//! one thread, with the link between their MACs cycle by cycle.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::rxe::verbs::BoxedEndpoint;
use crate::rxe::Endpoint;

/// What crossed the wire.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WireStats {
    pub a_to_b: u64,
    pub b_to_a: u64,
    pub bytes_a_to_b: u64,
    pub bytes_b_to_a: u64,
}

/// The cable between two endpoints, running until [`Wire::stop`].
pub struct Wire {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<WireStats>>,
}

impl Wire {
    pub fn connect(mut a: BoxedEndpoint, mut b: BoxedEndpoint) -> Wire {
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let thread = std::thread::spawn(move || {
            let t0 = Instant::now();
            let mut st = WireStats::default();
            let (mut to_a, mut to_b): (VecDeque<Vec<u8>>, VecDeque<Vec<u8>>) = (VecDeque::new(), VecDeque::new());
            while !s2.load(Ordering::Relaxed) {
                let now = t0.elapsed().as_nanos() as u64;
                to_b.extend(a.poll(now));
                to_a.extend(b.poll(now));
                let moved = !to_a.is_empty() || !to_b.is_empty();
                while !to_a.is_empty() || !to_b.is_empty() {
                    while let Some(f) = to_b.pop_front() {
                        st.a_to_b += 1;
                        st.bytes_a_to_b += f.len() as u64;
                        to_a.extend(b.on_frame(&f, now));
                    }
                    while let Some(f) = to_a.pop_front() {
                        st.b_to_a += 1;
                        st.bytes_b_to_a += f.len() as u64;
                        to_b.extend(a.on_frame(&f, now));
                    }
                }
                if !moved {
                    std::thread::sleep(Duration::from_micros(50));
                }
            }
            st
        });
        Wire { stop, thread: Some(thread) }
    }

    /// Stop the cable; what crossed it.
    pub fn stop(mut self) -> WireStats {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().map(|t| t.join().unwrap_or_default()).unwrap_or_default()
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
