//! The management TCP path: a userspace TCP/IP stack (smoltcp) on our side of the VM's one Ethernet link,
//! so that Rust code can exchange bytes with the tools in the VM (ibv_rc_pingpong / perftest swap
//! QPN/PSN/GID/rkey over TCP 18515+) with no host network at all.
//!
//! [`HostStack`](super::HostStack) feeds it the TCP segments addressed to our IP and the ARP frames, and
//! sends what it emits. User code holds a [`Mgmt`] (cheap to clone, usable from any thread) and calls
//! [`Mgmt::connect`] or [`Mgmt::listen`]; the returned [`TcpConn`] has blocking calls with timeouts. The
//! bridge thread drives the stack every poll interval (1 ms by default), so latency is about that.

use std::collections::{HashSet, VecDeque};
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::phy::{Device, DeviceCapabilities, Medium};
use smoltcp::socket::tcp;
use smoltcp::time::Instant as SmolInstant;
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr, Ipv4Address};
use testbench::wire::frame::MacAddr;

/// Socket buffer size of each connection, each direction.
const TCP_BUF: usize = 64 * 1024;
/// First local port of outgoing connections.
const EPHEMERAL_BASE: u16 = 40000;
/// How often a blocked user call re-checks its socket.
const USER_SPIN: Duration = Duration::from_millis(1);

struct QueueDevice {
    rx: VecDeque<Vec<u8>>,
    tx: Vec<Vec<u8>>,
    mtu: usize,
}

struct RxTok(Vec<u8>);
struct TxTok<'a>(&'a mut Vec<Vec<u8>>);

impl smoltcp::phy::RxToken for RxTok {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}

impl smoltcp::phy::TxToken for TxTok<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut buf = vec![0u8; len];
        let r = f(&mut buf);
        self.0.push(buf);
        r
    }
}

impl Device for QueueDevice {
    type RxToken<'a> = RxTok;
    type TxToken<'a> = TxTok<'a>;

    fn receive(&mut self, _t: SmolInstant) -> Option<(RxTok, TxTok<'_>)> {
        let f = self.rx.pop_front()?;
        Some((RxTok(f), TxTok(&mut self.tx)))
    }
    fn transmit(&mut self, _t: SmolInstant) -> Option<TxTok<'_>> {
        Some(TxTok(&mut self.tx))
    }
    fn capabilities(&self) -> DeviceCapabilities {
        let mut c = DeviceCapabilities::default();
        c.medium = Medium::Ethernet;
        c.max_transmission_unit = self.mtu + 14;
        c
    }
}

struct Inner {
    iface: Interface,
    sockets: SocketSet<'static>,
    dev: QueueDevice,
    now_ns: u64,
    next_port: u16,
    /// Sockets whose user handle is gone; removed once closed.
    detached: HashSet<SocketHandle>,
}

impl Inner {
    fn smol_now(&self) -> SmolInstant {
        SmolInstant::from_micros((self.now_ns / 1000) as i64)
    }
    fn pump(&mut self) -> Vec<Vec<u8>> {
        let now = self.smol_now();
        self.iface.poll(now, &mut self.dev, &mut self.sockets);
        let gone: Vec<SocketHandle> = self
            .detached
            .iter()
            .copied()
            .filter(|h| {
                matches!(
                    self.sockets.get::<tcp::Socket>(*h).state(),
                    tcp::State::Closed | tcp::State::TimeWait
                )
            })
            .collect();
        for h in gone {
            self.detached.remove(&h);
            self.sockets.remove(h);
        }
        std::mem::take(&mut self.dev.tx)
    }
}

/// Handle on the management TCP stack. Clone it freely; all clones drive the same stack.
#[derive(Clone)]
pub struct Mgmt {
    inner: Arc<Mutex<Inner>>,
    ip: Ipv4Addr,
}

impl Mgmt {
    /// A stack with address `ip/prefix_len` on MAC `mac`, for an Ethernet MTU of `mtu`.
    pub fn new(mac: MacAddr, ip: Ipv4Addr, prefix_len: u8, mtu: usize, seed: u64) -> Mgmt {
        let mut dev = QueueDevice {
            rx: VecDeque::new(),
            tx: Vec::new(),
            mtu,
        };
        let mut cfg = Config::new(HardwareAddress::Ethernet(EthernetAddress(mac.0)));
        cfg.random_seed = seed;
        let mut iface = Interface::new(cfg, &mut dev, SmolInstant::from_micros(0));
        iface.update_ip_addrs(|a| {
            a.push(IpCidr::new(
                IpAddress::Ipv4(Ipv4Address::from(ip.octets())),
                prefix_len,
            ))
            .expect("one address fits");
        });
        Mgmt {
            inner: Arc::new(Mutex::new(Inner {
                iface,
                sockets: SocketSet::new(Vec::new()),
                dev,
                now_ns: 0,
                next_port: EPHEMERAL_BASE,
                detached: HashSet::new(),
            })),
            ip,
        }
    }

    /// Our IP address.
    pub fn ip(&self) -> Ipv4Addr {
        self.ip
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap()
    }

    /// Feed one received Ethernet frame; returns the frames to send.
    pub fn on_frame(&self, frame: &[u8], now_ns: u64) -> Vec<Vec<u8>> {
        let mut g = self.lock();
        g.now_ns = g.now_ns.max(now_ns);
        g.dev.rx.push_back(frame.to_vec());
        g.pump()
    }

    /// Run timers and send what user calls queued; returns the frames to send.
    pub fn poll(&self, now_ns: u64) -> Vec<Vec<u8>> {
        let mut g = self.lock();
        g.now_ns = g.now_ns.max(now_ns);
        g.pump()
    }

    fn new_socket() -> tcp::Socket<'static> {
        let mut s = tcp::Socket::new(
            tcp::SocketBuffer::new(vec![0; TCP_BUF]),
            tcp::SocketBuffer::new(vec![0; TCP_BUF]),
        );
        s.set_nagle_enabled(false);
        s.set_ack_delay(None);
        s
    }

    /// Open a TCP connection to `remote:port` (in the VM). Retries (a refused SYN, an unanswered ARP) until
    /// the connection is established or `timeout` passes, so it can be called before the VM's listener is up.
    pub fn connect(&self, remote: Ipv4Addr, port: u16, timeout: Duration) -> Result<TcpConn> {
        let deadline = Instant::now() + timeout;
        loop {
            let handle = {
                let mut g = self.lock();
                let local = g.next_port;
                g.next_port = if local >= 60999 {
                    EPHEMERAL_BASE
                } else {
                    local + 1
                };
                let h = g.sockets.add(Self::new_socket());
                let Inner { iface, sockets, .. } = &mut *g;
                let remote_ep = (IpAddress::Ipv4(Ipv4Address::from(remote.octets())), port);
                if let Err(e) =
                    sockets
                        .get_mut::<tcp::Socket>(h)
                        .connect(iface.context(), remote_ep, local)
                {
                    sockets.remove(h);
                    bail!("connect to {remote}:{port}: {e}");
                }
                h
            };
            let conn = TcpConn {
                mgmt: self.clone(),
                handle,
            };
            // SynSent until answered; Closed after an RST (nobody listening yet).
            loop {
                let st = conn.state();
                match st {
                    tcp::State::Established | tcp::State::CloseWait => return Ok(conn),
                    tcp::State::Closed => break,
                    _ => {}
                }
                if Instant::now() > deadline {
                    conn.abort();
                    bail!("connect to {remote}:{port}: timed out after {timeout:?} (state {st})");
                }
                std::thread::sleep(USER_SPIN);
            }
            drop(conn);
            if Instant::now() > deadline {
                bail!("connect to {remote}:{port}: refused until the timeout ({timeout:?})");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Listen on our TCP `port` for one connection from the VM.
    pub fn listen(&self, port: u16) -> Result<TcpListener> {
        let mut g = self.lock();
        let h = g.sockets.add(Self::new_socket());
        if let Err(e) = g.sockets.get_mut::<tcp::Socket>(h).listen(port) {
            g.sockets.remove(h);
            bail!("listen on {port}: {e}");
        }
        Ok(TcpListener {
            conn: Some(TcpConn {
                mgmt: self.clone(),
                handle: h,
            }),
            port,
        })
    }
}

/// A listening socket for one incoming connection (listen again for more).
pub struct TcpListener {
    conn: Option<TcpConn>,
    port: u16,
}

impl TcpListener {
    pub fn port(&self) -> u16 {
        self.port
    }
    /// Wait until a peer has connected.
    pub fn accept(mut self, timeout: Duration) -> Result<TcpConn> {
        let deadline = Instant::now() + timeout;
        let conn = self.conn.take().expect("listener holds its socket");
        loop {
            match conn.state() {
                tcp::State::Listen | tcp::State::SynReceived => {}
                _ => return Ok(conn),
            }
            if Instant::now() > deadline {
                bail!(
                    "accept on port {}: nobody connected within {timeout:?}",
                    self.port
                );
            }
            std::thread::sleep(USER_SPIN);
        }
    }
}

/// One TCP connection on the management stack. Dropping it closes it gracefully (FIN).
pub struct TcpConn {
    mgmt: Mgmt,
    handle: SocketHandle,
}

impl TcpConn {
    fn with<R>(&self, f: impl FnOnce(&mut tcp::Socket<'static>) -> R) -> R {
        let mut g = self.mgmt.lock();
        f(g.sockets.get_mut::<tcp::Socket>(self.handle))
    }

    /// The TCP state.
    pub fn state(&self) -> tcp::State {
        self.with(|s| s.state())
    }

    /// The peer's address and port, once connected.
    pub fn remote(&self) -> Option<(Ipv4Addr, u16)> {
        let ep = self.with(|s| s.remote_endpoint())?;
        #[allow(unreachable_patterns)]
        match ep.addr {
            IpAddress::Ipv4(a) => Some((Ipv4Addr::from(a.octets()), ep.port)),
            _ => None,
        }
    }

    /// Queue all of `data`, waiting for buffer space; errors when the connection can no longer send.
    pub fn send_all(&self, mut data: &[u8], timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        while !data.is_empty() {
            let n = self.with(|s| {
                if !s.may_send() {
                    return Err(anyhow!("connection cannot send (state {})", s.state()));
                }
                s.send_slice(data).map_err(|e| anyhow!("send: {e}"))
            })?;
            data = &data[n..];
            if !data.is_empty() {
                if Instant::now() > deadline {
                    bail!("send timed out after {timeout:?}");
                }
                std::thread::sleep(USER_SPIN);
            }
        }
        Ok(())
    }

    /// Wait until everything queued has been acknowledged by the peer.
    pub fn flush(&self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        while self.with(|s| s.send_queue() > 0 && s.may_send()) {
            if Instant::now() > deadline {
                bail!("flush timed out after {timeout:?}");
            }
            std::thread::sleep(USER_SPIN);
        }
        Ok(())
    }

    /// Wait for data: returns what is there (at least one byte), or an empty vector at end of stream.
    pub fn recv(&self, timeout: Duration) -> Result<Vec<u8>> {
        let deadline = Instant::now() + timeout;
        loop {
            let r = self.with(|s| {
                if s.can_recv() {
                    let mut buf = vec![0u8; s.recv_queue()];
                    let n = s.recv_slice(&mut buf).map_err(|e| anyhow!("recv: {e}"))?;
                    buf.truncate(n);
                    Ok::<_, anyhow::Error>(Some(buf))
                } else if !s.may_recv()
                    && s.state() != tcp::State::SynSent
                    && s.state() != tcp::State::Listen
                {
                    Ok(Some(Vec::new()))
                } else {
                    Ok(None)
                }
            })?;
            if let Some(b) = r {
                return Ok(b);
            }
            if Instant::now() > deadline {
                bail!("recv timed out after {timeout:?} (state {})", self.state());
            }
            std::thread::sleep(USER_SPIN);
        }
    }

    /// Read exactly `n` bytes.
    pub fn recv_exact(&self, n: usize, timeout: Duration) -> Result<Vec<u8>> {
        let deadline = Instant::now() + timeout;
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            // never take more than asked for: peek the queue first
            let chunk = self.with(|s| {
                let want = (n - out.len()).min(s.recv_queue());
                let mut buf = vec![0u8; want];
                let k = s.recv_slice(&mut buf).unwrap_or(0);
                buf.truncate(k);
                (buf, s.may_recv())
            });
            match chunk {
                (b, _) if !b.is_empty() => out.extend_from_slice(&b),
                (_, false) => bail!("end of stream after {} of {n} bytes", out.len()),
                _ => {
                    if left.is_zero() {
                        bail!("recv_exact timed out after {} of {n} bytes", out.len());
                    }
                    std::thread::sleep(USER_SPIN);
                }
            }
        }
        Ok(out)
    }

    /// Read until the peer closes its side.
    pub fn recv_to_end(&self, timeout: Duration) -> Result<Vec<u8>> {
        let deadline = Instant::now() + timeout;
        let mut out = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                bail!("recv_to_end timed out after {} bytes", out.len());
            }
            let b = self.recv(left)?;
            if b.is_empty() {
                return Ok(out);
            }
            out.extend_from_slice(&b);
        }
    }

    /// Send FIN (the connection can still receive).
    pub fn close(&self) {
        self.with(|s| s.close());
    }

    /// Send RST.
    pub fn abort(&self) {
        self.with(|s| s.abort());
    }
}

impl Drop for TcpConn {
    fn drop(&mut self) {
        let mut g = self.mgmt.lock();
        let s = g.sockets.get_mut::<tcp::Socket>(self.handle);
        s.close();
        if s.state() == tcp::State::Closed {
            g.sockets.remove(self.handle);
        } else {
            g.detached.insert(self.handle);
        }
    }
}
