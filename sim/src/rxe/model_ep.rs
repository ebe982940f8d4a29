//! The golden transport model (`testbench::model::Device`) as our side of the rxe link.
//!
//! The bridge thread feeds frames in and polls for frames out through [`ModelEndpoint`]; application code
//! (the pingpong and perftest peers) posts work and polls completions through the same [`SharedDevice`] from
//! its own thread. Time is the bridge's clock (ns since the VM connected), so the model's retransmit and RNR
//! timers run in real time.

use super::Endpoint;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use testbench::model::{Device, DeviceConfig, WorkCompletion};

/// A model device shared between the bridge and the application.
#[derive(Clone)]
pub struct SharedDevice(Arc<Mutex<Device>>);

impl SharedDevice {
    pub fn new(cfg: DeviceConfig) -> Self {
        Self(Arc::new(Mutex::new(Device::new(cfg))))
    }

    pub fn lock(&self) -> MutexGuard<'_, Device> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The endpoint to hand to the bridge (inside a `HostStack`).
    pub fn endpoint(&self) -> ModelEndpoint {
        ModelEndpoint { dev: self.clone() }
    }

    /// Poll `cq` until `n` completions arrived or `timeout` passed.
    pub fn wait_cq(&self, cq: testbench::model::Cq, n: usize, timeout: Duration) -> Vec<WorkCompletion> {
        let end = Instant::now() + timeout;
        let mut got = Vec::new();
        while got.len() < n && Instant::now() < end {
            let more = self.lock().poll_cq(cq, n - got.len());
            if more.is_empty() {
                std::thread::sleep(Duration::from_micros(100));
            }
            got.extend(more);
        }
        got
    }
}

/// [`Endpoint`] over a [`SharedDevice`].
pub struct ModelEndpoint {
    dev: SharedDevice,
}

impl Endpoint for ModelEndpoint {
    fn on_frame(&mut self, frame: &[u8], now_ns: u64) -> Vec<Vec<u8>> {
        let mut d = self.dev.lock();
        d.receive(now_ns, frame);
        d.poll(now_ns)
    }

    fn poll(&mut self, now_ns: u64) -> Vec<Vec<u8>> {
        self.dev.lock().poll(now_ns)
    }
}
