//! Our side of the VM's Ethernet link: qemu's `-netdev stream` unix socket, a pcap of every frame, optional
//! seeded loss, and the [`Endpoint`] that answers.

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::DataLink;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::host::{is_roce_v2, roce_v2_dest_qpn};

/// Largest frame accepted from qemu (jumbo MTU 9000 plus headers, with margin).
pub const MAX_FRAME_LEN: usize = 65536;

/// Whatever sits on our side of the wire: the host stack, the golden model, later the Verilator RTL.
///
/// Frames are whole Ethernet frames without FCS. `now_ns` is nanoseconds since the bridge accepted the VM's
/// connection (monotonic). Both calls return the frames to transmit to the VM, in order.
pub trait Endpoint {
    /// A frame arrived from the VM.
    fn on_frame(&mut self, frame: &[u8], now_ns: u64) -> Vec<Vec<u8>>;
    /// Called periodically (every [`BridgeConfig::poll_interval`] at least) and after each received burst.
    fn poll(&mut self, now_ns: u64) -> Vec<Vec<u8>>;
    /// The endpoint answers ICMP echo itself (the RTL's echo responder): a host in front of it hands pings on.
    fn answers_icmp(&self) -> bool {
        false
    }
    /// The endpoint speaks ARP itself (the RTL's responder and resolver): a host in front of it hands ARP
    /// frames on instead of answering them.
    fn answers_arp(&self) -> bool {
        false
    }
    /// The endpoint answers IPv6 neighbour solicitations itself (the RTL's ND responder): a host in front of
    /// it hands ICMPv6 for its IPv6 address on instead of answering.
    fn answers_nd(&self) -> bool {
        false
    }
}

impl<E: Endpoint + ?Sized> Endpoint for Box<E> {
    fn on_frame(&mut self, frame: &[u8], now_ns: u64) -> Vec<Vec<u8>> {
        (**self).on_frame(frame, now_ns)
    }
    fn poll(&mut self, now_ns: u64) -> Vec<Vec<u8>> {
        (**self).poll(now_ns)
    }
    fn answers_icmp(&self) -> bool {
        (**self).answers_icmp()
    }
    fn answers_arp(&self) -> bool {
        (**self).answers_arp()
    }
    fn answers_nd(&self) -> bool {
        (**self).answers_nd()
    }
}

/// An endpoint that swallows everything and sends nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NullEndpoint;

impl Endpoint for NullEndpoint {
    fn on_frame(&mut self, _frame: &[u8], _now_ns: u64) -> Vec<Vec<u8>> {
        Vec::new()
    }
    fn poll(&mut self, _now_ns: u64) -> Vec<Vec<u8>> {
        Vec::new()
    }
}

/// Bridge options.
#[derive(Clone, Debug)]
pub struct BridgeConfig {
    /// Write every delivered frame, both directions, to this pcap (LINKTYPE_ETHERNET, µs timestamps).
    /// Dropped frames are not written (they never reached the other side); they are counted in
    /// [`BridgeStats`].
    pub pcap: Option<PathBuf>,
    /// Probability in [0, 1] of dropping a RoCEv2 frame sent by the VM before our endpoint sees it.
    ///
    /// Only RoCEv2 frames (UDP destination port 4791) are ever dropped. ARP and the tools' out-of-band TCP
    /// stand for a lab's management network: a tool writes its last message ("done") and exits, the VM powers
    /// off, and a dropped final segment could then never be retransmitted by anyone, so the run would fail for
    /// a reason that has nothing to do with the RDMA transport under test.
    pub drop_from_vm: f64,
    /// Probability in [0, 1] of dropping a RoCEv2 frame our endpoint sends before the VM gets it (RoCEv2
    /// only, as for `drop_from_vm`).
    pub drop_to_vm: f64,
    /// Seed of the drop decisions (each direction has its own generator, so runs are reproducible as long as
    /// each side's frame sequence is).
    pub seed: u64,
    /// Once this flag is set, nothing more is dropped. A run whose tools tear their QPs down as soon as their
    /// own last completion is in (ibv_rc_pingpong) sets it when the last message is posted: a lost final ACK
    /// could then only be retransmitted into a QP that no longer exists, which no RC implementation can
    /// recover (rxe's neither), so the last exchange runs loss-free and every earlier one is lossy.
    pub drops_end: Option<Arc<AtomicBool>>,
    /// When set, only the RoCEv2 frames to this destination QP are dropped (QP1: the CM's MADs), and only
    /// they draw from the drop generators.
    pub drop_only_qp: Option<u32>,
    /// Longest time between two [`Endpoint::poll`] calls.
    pub poll_interval: Duration,
    /// How long to wait for qemu to connect.
    pub accept_timeout: Duration,
}

impl Default for BridgeConfig {
    fn default() -> Self {
        BridgeConfig {
            pcap: None,
            drop_from_vm: 0.0,
            drop_to_vm: 0.0,
            seed: 1,
            drops_end: None,
            drop_only_qp: None,
            poll_interval: Duration::from_millis(1),
            accept_timeout: Duration::from_secs(30),
        }
    }
}

/// Frame counters of one bridge run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BridgeStats {
    /// Frames received from the VM and delivered to the endpoint.
    pub from_vm: u64,
    /// Frames sent to the VM.
    pub to_vm: u64,
    pub bytes_from_vm: u64,
    pub bytes_to_vm: u64,
    pub dropped_from_vm: u64,
    pub dropped_to_vm: u64,
}

/// The listening end of one VM link. Create it before starting qemu (qemu 7.2's stream netdev does not
/// reconnect), then [`Bridge::run`] or [`Bridge::spawn`].
pub struct Bridge {
    listener: UnixListener,
    path: PathBuf,
    cfg: BridgeConfig,
}

/// A bridge running in its own thread.
pub struct BridgeHandle<E> {
    stop: Arc<AtomicBool>,
    stats: Arc<Mutex<BridgeStats>>,
    thread: JoinHandle<BridgeReport<E>>,
}

/// What a finished bridge thread hands back.
pub struct BridgeReport<E> {
    pub endpoint: E,
    pub stats: BridgeStats,
    /// Why the bridge stopped early (qemu never connected, I/O error); `None` after a clean EOF or stop.
    pub error: Option<anyhow::Error>,
}

impl<E> BridgeHandle<E> {
    /// Ask the bridge to stop (it returns within one poll interval).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }
    /// Counters so far.
    pub fn stats(&self) -> BridgeStats {
        *self.stats.lock().unwrap()
    }
    /// Wait for the bridge to end (qemu closed the link, or [`BridgeHandle::stop`]).
    pub fn join(self) -> BridgeReport<E> {
        self.thread.join().expect("bridge thread panicked")
    }
    /// Wait up to `grace` for the bridge to end by itself (qemu closed the link and every frame already read
    /// was handled), then stop it and join.
    pub fn join_within(self, grace: Duration) -> BridgeReport<E> {
        let deadline = Instant::now() + grace;
        while !self.thread.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.stop_and_join()
    }
    /// [`BridgeHandle::stop`], then [`BridgeHandle::join`].
    pub fn stop_and_join(self) -> BridgeReport<E> {
        self.stop();
        self.join()
    }
}

struct Pcap {
    w: PcapWriter<std::fs::File>,
}

impl Pcap {
    fn create(path: &Path) -> Result<Self> {
        let f =
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let header = PcapHeader {
            datalink: DataLink::ETHERNET,
            snaplen: MAX_FRAME_LEN as u32,
            ..Default::default()
        };
        Ok(Pcap {
            w: PcapWriter::with_header(f, header)?,
        })
    }
    fn write(&mut self, frame: &[u8]) -> Result<()> {
        let ts = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        self.w
            .write_packet(&PcapPacket::new(ts, frame.len() as u32, frame))?;
        Ok(())
    }
}

fn read_frame(s: &mut UnixStream) -> std::io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    match s.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let n = u32::from_be_bytes(len) as usize;
    if n > MAX_FRAME_LEN {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("frame length {n} from qemu is too large"),
        ));
    }
    let mut f = vec![0u8; n];
    s.read_exact(&mut f)?;
    Ok(Some(f))
}

impl Bridge {
    /// Bind the unix socket at `path` (a stale socket file there is removed). Paths must be shorter than
    /// 108 bytes.
    pub fn listen(path: impl AsRef<Path>, cfg: BridgeConfig) -> Result<Bridge> {
        let path = path.as_ref().to_path_buf();
        if path.as_os_str().len() >= 104 {
            bail!(
                "unix socket path too long ({} bytes): {}",
                path.as_os_str().len(),
                path.display()
            );
        }
        if path.exists() {
            std::fs::remove_file(&path)
                .with_context(|| format!("removing stale {}", path.display()))?;
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let listener =
            UnixListener::bind(&path).with_context(|| format!("binding {}", path.display()))?;
        Ok(Bridge {
            listener,
            path,
            cfg,
        })
    }

    /// The socket path to give qemu.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Run in the calling thread until qemu closes the link or `stop` is set.
    pub fn run<E: Endpoint + ?Sized>(self, ep: &mut E, stop: &AtomicBool) -> Result<BridgeStats> {
        let stats = Arc::new(Mutex::new(BridgeStats::default()));
        self.run_shared(ep, stop, &stats)?;
        let s = *stats.lock().unwrap();
        Ok(s)
    }

    /// Run in a new thread; the endpoint comes back in the [`BridgeReport`].
    pub fn spawn<E: Endpoint + Send + 'static>(self, mut ep: E) -> BridgeHandle<E> {
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(Mutex::new(BridgeStats::default()));
        let (stop2, stats2) = (stop.clone(), stats.clone());
        let thread = std::thread::Builder::new()
            .name("rxe-bridge".into())
            .spawn(move || {
                let error = self.run_shared(&mut ep, &stop2, &stats2).err();
                let stats = *stats2.lock().unwrap();
                BridgeReport {
                    endpoint: ep,
                    stats,
                    error,
                }
            })
            .expect("spawning the bridge thread");
        BridgeHandle {
            stop,
            stats,
            thread,
        }
    }

    fn accept(&self, stop: &AtomicBool) -> Result<Option<UnixStream>> {
        self.listener.set_nonblocking(true)?;
        let deadline = Instant::now() + self.cfg.accept_timeout;
        loop {
            match self.listener.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false)?;
                    return Ok(Some(s));
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if stop.load(Ordering::SeqCst) {
                        return Ok(None);
                    }
                    if Instant::now() > deadline {
                        bail!(
                            "qemu did not connect to {} within {:?}",
                            self.path.display(),
                            self.cfg.accept_timeout
                        );
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn run_shared<E: Endpoint + ?Sized>(
        self,
        ep: &mut E,
        stop: &AtomicBool,
        stats: &Mutex<BridgeStats>,
    ) -> Result<()> {
        let mut pcap = match &self.cfg.pcap {
            Some(p) => Some(Pcap::create(p)?),
            None => None,
        };
        let Some(stream) = self.accept(stop)? else {
            return Ok(());
        };
        let _ = std::fs::remove_file(&self.path);
        let t0 = Instant::now();
        let now_ns = || t0.elapsed().as_nanos() as u64;
        let mut rng_in = SmallRng::seed_from_u64(self.cfg.seed);
        let mut rng_out = SmallRng::seed_from_u64(self.cfg.seed ^ 0x9E37_79B9_7F4A_7C15);
        let (p_in, p_out) = (self.cfg.drop_from_vm, self.cfg.drop_to_vm);
        let drops_end = self.cfg.drops_end.clone();
        let dropping = move || !drops_end.as_ref().is_some_and(|f| f.load(Ordering::SeqCst));
        let only_qp = self.cfg.drop_only_qp;
        let droppable = move |f: &[u8]| match only_qp {
            None => is_roce_v2(f),
            Some(q) => roce_v2_dest_qpn(f) == Some(q),
        };

        // The reader thread blocks on the socket; the loop below never blocks on it, so a slow qemu can't
        // deadlock us (qemu reads and writes the socket independently).
        let (tx, rx) = mpsc::channel::<std::io::Result<Vec<u8>>>();
        let mut rd = stream.try_clone()?;
        let reader = std::thread::Builder::new()
            .name("rxe-bridge-rx".into())
            .spawn(move || loop {
                match read_frame(&mut rd) {
                    Ok(Some(f)) => {
                        if tx.send(Ok(f)).is_err() {
                            return;
                        }
                    }
                    Ok(None) => return,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                }
            })?;
        let mut wr = stream.try_clone()?;
        // Ok(false): qemu closed the link.
        let mut send = |frames: Vec<Vec<u8>>, pcap: &mut Option<Pcap>| -> Result<bool> {
            for f in frames {
                if p_out > 0.0 && droppable(&f) && dropping() && rng_out.gen_bool(p_out.min(1.0)) {
                    stats.lock().unwrap().dropped_to_vm += 1;
                    continue;
                }
                if let Some(p) = pcap.as_mut() {
                    p.write(&f)?;
                }
                let mut buf = Vec::with_capacity(4 + f.len());
                buf.extend_from_slice(&(f.len() as u32).to_be_bytes());
                buf.extend_from_slice(&f);
                match wr.write_all(&buf) {
                    Ok(()) => {}
                    // qemu went away while we still had frames for it: the link is down, not an error
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
                        ) =>
                    {
                        return Ok(false)
                    }
                    Err(e) => return Err(anyhow::Error::from(e).context("writing a frame to qemu")),
                }
                let mut s = stats.lock().unwrap();
                s.to_vm += 1;
                s.bytes_to_vm += f.len() as u64;
            }
            Ok(true)
        };

        let result = (|| -> Result<()> {
            let mut next_poll = Instant::now();
            loop {
                if stop.load(Ordering::SeqCst) {
                    return Ok(());
                }
                let wait = next_poll.saturating_duration_since(Instant::now());
                let mut got = match rx.recv_timeout(wait) {
                    Ok(r) => Some(r),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => return Ok(()),
                };
                while let Some(r) = got.take() {
                    let frame = r.context("reading a frame from qemu")?;
                    if p_in > 0.0 && droppable(&frame) && dropping() && rng_in.gen_bool(p_in.min(1.0)) {
                        stats.lock().unwrap().dropped_from_vm += 1;
                    } else {
                        if let Some(p) = pcap.as_mut() {
                            p.write(&frame)?;
                        }
                        {
                            let mut s = stats.lock().unwrap();
                            s.from_vm += 1;
                            s.bytes_from_vm += frame.len() as u64;
                        }
                        let out = ep.on_frame(&frame, now_ns());
                        if !send(out, &mut pcap)? {
                            return Ok(());
                        }
                    }
                    got = rx.try_recv().ok();
                }
                let out = ep.poll(now_ns());
                if !send(out, &mut pcap)? {
                    return Ok(());
                }
                next_poll = Instant::now() + self.cfg.poll_interval;
            }
        })();
        let _ = stream.shutdown(std::net::Shutdown::Both);
        let _ = reader.join();
        result
    }
}
