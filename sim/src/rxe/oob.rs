//! The tools' out-of-band exchange (QPN, PSN, GID, rkey and VA over TCP, before any RDMA traffic) on either
//! of its two paths:
//!
//! * **the lab's link** ([`Oob::Lab`]): the userspace TCP stack on the VM's one Ethernet link
//!   ([`super::Mgmt`]), beside the RoCE frames, all in one pcap;
//! * **the host's ordinary network** ([`Oob::Net`]): `std::net` sockets, as with the card against a remote
//!   rxe host (the exchange over the management network, RoCE over the card's 100G link). In the lab the VM
//!   then has a second NIC (qemu user networking): our listener is its `10.0.2.2:PORT`, its listener our
//!   `127.0.0.1:FWD`.
//!
//! The tool peers speak only [`OobConn`].

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// One exchange connection.
pub trait OobConn: Send {
    fn send_all(&self, data: &[u8], timeout: Duration) -> Result<()>;
    fn recv_exact(&self, n: usize, timeout: Duration) -> Result<Vec<u8>>;
    /// Wait until what was sent has left (the lab's stack); a kernel socket has it queued already.
    fn flush(&self, timeout: Duration) -> Result<()>;
    /// Orderly close (FIN).
    fn close(&self);
    /// Reset (after an error, so the peer's tool stops waiting).
    fn abort(&self);
}

impl OobConn for super::TcpConn {
    fn send_all(&self, data: &[u8], timeout: Duration) -> Result<()> {
        super::TcpConn::send_all(self, data, timeout)
    }
    fn recv_exact(&self, n: usize, timeout: Duration) -> Result<Vec<u8>> {
        super::TcpConn::recv_exact(self, n, timeout)
    }
    fn flush(&self, timeout: Duration) -> Result<()> {
        super::TcpConn::flush(self, timeout)
    }
    fn close(&self) {
        super::TcpConn::close(self)
    }
    fn abort(&self) {
        super::TcpConn::abort(self)
    }
}

/// A connection over the host's network.
pub struct NetConn(pub TcpStream);

impl OobConn for NetConn {
    fn send_all(&self, data: &[u8], timeout: Duration) -> Result<()> {
        self.0.set_write_timeout(Some(timeout.max(Duration::from_millis(1))))?;
        (&self.0).write_all(data).context("sending on the exchange connection")
    }
    fn recv_exact(&self, n: usize, timeout: Duration) -> Result<Vec<u8>> {
        self.0.set_read_timeout(Some(timeout.max(Duration::from_millis(1))))?;
        let mut b = vec![0u8; n];
        (&self.0).read_exact(&mut b).with_context(|| format!("receiving {n} bytes on the exchange connection"))?;
        Ok(b)
    }
    fn flush(&self, _timeout: Duration) -> Result<()> {
        Ok(())
    }
    fn close(&self) {
        let _ = self.0.shutdown(Shutdown::Write);
    }
    fn abort(&self) {
        let _ = self.0.shutdown(Shutdown::Both);
    }
}

/// Where the exchange goes.
#[derive(Clone)]
pub enum Oob {
    /// The lab's TCP stack on the link; the peer tool at `peer`.
    Lab { mgmt: super::Mgmt, peer: Ipv4Addr },
    /// The host's network: the peer tool's listener at `connect` (when we are the client); ours bound to
    /// `listen` (when we are the server).
    Net { connect: SocketAddr, listen: SocketAddr },
}

/// A TCP port free on this host's loopback now (for a forward the VM's NIC makes).
pub fn free_port() -> Result<u16> {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("finding a free port")?;
    Ok(l.local_addr()?.port())
}

/// A listener made before the peer's tool starts.
pub enum Listening {
    Lab(super::TcpListener),
    Net(TcpListener),
}

impl Oob {
    /// Listen on `port` (the lab) or the configured address (the host's network).
    pub fn listen(&self, port: u16) -> Result<Listening> {
        match self {
            Oob::Lab { mgmt, .. } => Ok(Listening::Lab(mgmt.listen(port)?)),
            Oob::Net { listen, .. } => {
                let l = TcpListener::bind(listen).with_context(|| format!("listening on {listen} for the peer's tool"))?;
                Ok(Listening::Net(l))
            }
        }
    }

    /// Connect to the peer's tool listening on `port` (the lab; the host's network: the configured address),
    /// retrying until it listens or `timeout` passes.
    pub fn connect(&self, port: u16, timeout: Duration) -> Result<Box<dyn OobConn>> {
        match self {
            Oob::Lab { mgmt, peer } => Ok(Box::new(mgmt.connect(*peer, port, timeout)?)),
            Oob::Net { connect, .. } => {
                let end = Instant::now() + timeout;
                let s = net_connect(connect, end, timeout)?;
                Ok(Box::new(FwdConn {
                    addr: *connect,
                    end,
                    timeout,
                    state: std::sync::Mutex::new(FwdState { s: NetConn(s), sent: Vec::new(), confirmed: false }),
                }))
            }
        }
    }
}

/// Connect to `addr`, retrying until `end`. A forwarded port (qemu's) accepts at once and resets when nobody
/// listens behind it: the connection counts once a first byte could be awaited for 50 ms without a reset.
fn net_connect(addr: &SocketAddr, end: Instant, timeout: Duration) -> Result<TcpStream> {
    loop {
        let left = end.saturating_duration_since(Instant::now());
        match TcpStream::connect_timeout(addr, left.clamp(Duration::from_millis(10), Duration::from_secs(2))) {
            Ok(s) => {
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(Duration::from_millis(50)))?;
                let mut probe = [0u8; 1];
                match s.peek(&mut probe) {
                    Ok(0) => {}
                    Err(e) if matches!(e.kind(), std::io::ErrorKind::ConnectionReset) => {}
                    _ => return Ok(s),
                }
            }
            Err(e) if Instant::now() >= end => {
                return Err(e).with_context(|| format!("connecting to the peer's tool at {addr}"))
            }
            Err(_) => {}
        }
        if Instant::now() >= end {
            bail!("connecting to the peer's tool at {addr}: no listener within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A connection over the host's network that we opened. Until the first byte arrives from the peer it may
/// still be a forwarded port with nobody behind it, whose reset can come after the 50 ms probe when the
/// machine is loaded: a reset or close before any byte arrived reconnects (until the connect deadline) and
/// sends again what was sent so far. After the first byte it is an ordinary [`NetConn`].
struct FwdConn {
    addr: SocketAddr,
    end: Instant,
    timeout: Duration,
    state: std::sync::Mutex<FwdState>,
}

struct FwdState {
    s: NetConn,
    sent: Vec<u8>,
    confirmed: bool,
}

impl FwdConn {
    /// After `e` on an unconfirmed connection: reconnect and resend, or give `e` back.
    fn retry(&self, st: &mut FwdState, e: anyhow::Error) -> Result<()> {
        let reset = e.chain().any(|c| {
            c.downcast_ref::<std::io::Error>().is_some_and(|io| {
                matches!(
                    io.kind(),
                    std::io::ErrorKind::ConnectionReset
                        | std::io::ErrorKind::UnexpectedEof
                        | std::io::ErrorKind::BrokenPipe
                        | std::io::ErrorKind::ConnectionAborted
                )
            })
        });
        if st.confirmed || !reset || Instant::now() >= self.end {
            return Err(e);
        }
        std::thread::sleep(Duration::from_millis(100));
        st.s = NetConn(net_connect(&self.addr, self.end, self.timeout).context(e)?);
        if !st.sent.is_empty() {
            let left = self.end.saturating_duration_since(Instant::now());
            st.s.send_all(&st.sent, left)?;
        }
        Ok(())
    }
}

impl OobConn for FwdConn {
    fn send_all(&self, data: &[u8], timeout: Duration) -> Result<()> {
        let mut st = self.state.lock().unwrap();
        loop {
            match st.s.send_all(data, timeout) {
                Ok(()) => break,
                Err(e) => self.retry(&mut st, e)?,
            }
        }
        if !st.confirmed {
            st.sent.extend_from_slice(data);
        }
        Ok(())
    }
    fn recv_exact(&self, n: usize, timeout: Duration) -> Result<Vec<u8>> {
        let mut st = self.state.lock().unwrap();
        loop {
            match st.s.recv_exact(n, timeout) {
                Ok(b) => {
                    st.confirmed = true;
                    st.sent = Vec::new();
                    return Ok(b);
                }
                Err(e) => self.retry(&mut st, e)?,
            }
        }
    }
    fn flush(&self, _timeout: Duration) -> Result<()> {
        Ok(())
    }
    fn close(&self) {
        self.state.lock().unwrap().s.close()
    }
    fn abort(&self) {
        self.state.lock().unwrap().s.abort()
    }
}

impl Listening {
    /// The peer's tool connecting, within `timeout`.
    pub fn accept(self, timeout: Duration) -> Result<Box<dyn OobConn>> {
        match self {
            Listening::Lab(l) => Ok(Box::new(l.accept(timeout)?)),
            Listening::Net(l) => {
                l.set_nonblocking(true)?;
                let end = Instant::now() + timeout;
                loop {
                    match l.accept() {
                        Ok((s, _)) => {
                            s.set_nonblocking(false)?;
                            s.set_nodelay(true)?;
                            return Ok(Box::new(NetConn(s)));
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            if Instant::now() >= end {
                                bail!("the peer's tool did not connect to {} within {timeout:?}", l.local_addr()?);
                            }
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        Err(e) => return Err(e).context("accepting the peer's tool"),
                    }
                }
            }
        }
    }

    /// The port we listen on (for the peer's command line).
    pub fn port(&self) -> Option<u16> {
        match self {
            Listening::Lab(_) => None,
            Listening::Net(l) => l.local_addr().ok().map(|a| a.port()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Over the host's network: we listen and the other side connects, then the other way round (a listener
    /// that comes up late is waited for); bytes in both directions.
    #[test]
    fn net_exchange_both_ways() {
        let free = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = free.local_addr().unwrap();
        drop(free);
        let o = Oob::Net { connect: addr, listen: "127.0.0.1:0".parse().unwrap() };
        let l = o.listen(0).unwrap();
        let port = l.port().unwrap();
        let t = std::thread::spawn(move || {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.write_all(b"ping").unwrap();
            let mut b = [0u8; 4];
            s.read_exact(&mut b).unwrap();
            b
        });
        let c = l.accept(Duration::from_secs(5)).unwrap();
        assert_eq!(c.recv_exact(4, Duration::from_secs(5)).unwrap(), b"ping");
        c.send_all(b"pong", Duration::from_secs(5)).unwrap();
        assert_eq!(&t.join().unwrap(), b"pong");
        // the peer's listener comes up 300 ms after we start connecting
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            let l = TcpListener::bind(addr).unwrap();
            let (mut s, _) = l.accept().unwrap();
            s.write_all(b"hi").unwrap();
        });
        let c = o.connect(0, Duration::from_secs(5)).unwrap();
        assert_eq!(c.recv_exact(2, Duration::from_secs(5)).unwrap(), b"hi");
        t.join().unwrap();
        // a listener that accepts, then goes away before answering (a forwarded port with nobody behind it,
        // its reset later than the probe): the exchange reconnects and sends its bytes again
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let o2 = Oob::Net { connect: l.local_addr().unwrap(), listen: "127.0.0.1:0".parse().unwrap() };
        let t = std::thread::spawn(move || {
            let (first, _) = l.accept().unwrap();
            std::thread::sleep(Duration::from_millis(300));
            drop(first);
            let (mut s, _) = l.accept().unwrap();
            let mut b = [0u8; 4];
            s.read_exact(&mut b).unwrap();
            s.write_all(b"pong").unwrap();
            b
        });
        let c = o2.connect(0, Duration::from_secs(5)).unwrap();
        c.send_all(b"ping", Duration::from_secs(5)).unwrap();
        assert_eq!(c.recv_exact(4, Duration::from_secs(5)).unwrap(), b"pong");
        assert_eq!(&t.join().unwrap(), b"ping");
        // nobody listens: a clear error within the timeout
        let free = TcpListener::bind("127.0.0.1:0").unwrap();
        let none = Oob::Net { connect: free.local_addr().unwrap(), listen: "127.0.0.1:0".parse().unwrap() };
        drop(free);
        let e = none.connect(0, Duration::from_millis(400)).err().unwrap();
        assert!(format!("{e:#}").contains("peer's tool"), "{e:#}");
    }
}
