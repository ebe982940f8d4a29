//! rping's server (librdmacm's `rping -s`, rdma-core 44) over any endpoint's verbs, for the VM's `rping -c`:
//! the connection comes through the CM agent ([`super::cm`]), then each ping is rping's exchange:
//!
//! 1. the client SENDs the address, rkey and size of its start buffer (16 bytes, big-endian);
//! 2. the server READs that buffer, then SENDs 16 bytes ("go ahead");
//! 3. the client SENDs the address, rkey and size of its sink buffer;
//! 4. the server WRITEs what it read (up to and including its NUL) there, then SENDs 16 bytes ("done").
//!
//! The client checks every receive is exactly 16 bytes, and with `-V` that the sink holds its start buffer.

use anyhow::{bail, Result};
use testbench::model::{AccessFlags, Cq, Pd, QpCap, QpInitAttr, QpType, RecvWr, SendWr, Sge, WcOpcode, WcStatus, WrOpcode};
use testbench::wire::mad::CmReq;
use testbench::wire::MacAddr;

use super::cm::{qp_attrs_from_req, CmAgent};
use super::verbs::Dev;

/// rping's `struct rping_rdma_info`: address, rkey and size, big-endian.
pub const INFO_LEN: u32 = 16;
/// The largest ping we read (rping's `RPING_BUFSIZE` is 64 KiB).
const BUF: u64 = 64 << 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Waiting for the client's start buffer (its address, rkey, size).
    ReadAdv,
    /// Our READ of it is out.
    Reading,
    /// Waiting for the client's sink buffer.
    WriteAdv,
    /// Our WRITE into it is out.
    Writing,
}

/// One rping connection, server side.
pub struct RpingServer {
    dev: Dev,
    cq: Cq,
    pub qpn: u32,
    lkey: u32,
    /// Our receive buffer (16 bytes), send buffer (16), and ping buffer.
    base: u64,
    step: Step,
    /// The client's start buffer size, as it advertised.
    size: u32,
    /// What each ping read from the client's start buffer, up to its NUL.
    pub pings: Vec<Vec<u8>>,
}

const RECV_ID: u64 = 1;
const SEND_ID: u64 = 2;
const RDMA_ID: u64 = 3;

impl RpingServer {
    /// Take the connection request `id` (its REQ from `peer`/`mac`): a QP set up from the REQ, a receive
    /// posted, then the agent's REP.
    pub fn accept(dev: Dev, pd: Pd, agent: &mut CmAgent, id: u32, req: &CmReq, peer: std::net::Ipv4Addr, mac: MacAddr, psn: u32) -> Result<Self> {
        let base = dev.alloc((2 * u64::from(INFO_LEN) + BUF) as usize)?;
        let (lkey, _) = dev.reg_mr(pd, base, 2 * u64::from(INFO_LEN) + BUF, AccessFlags::LOCAL_WRITE)?;
        let cq = dev.create_cq(64)?;
        let cap = QpCap { max_send_wr: 16, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
        let qpn = dev.create_qp(pd, QpInitAttr { qp_type: QpType::Rc, send_cq: cq, recv_cq: cq, cap, sq_sig_all: true })?;
        let [init, rtr, rts] = qp_attrs_from_req(req, psn, testbench::model::AddressVector::new(mac, std::net::IpAddr::V4(peer)));
        dev.modify_qp(qpn, &init)?;
        let s = RpingServer { dev, cq, qpn, lkey, base, step: Step::ReadAdv, size: 0, pings: Vec::new() };
        s.post_recv()?;
        s.dev.modify_qp(qpn, &rtr)?;
        s.dev.modify_qp(qpn, &rts)?;
        agent.accept(id, req, qpn, psn)?;
        Ok(s)
    }

    fn post_recv(&self) -> Result<()> {
        self.dev.post_recv(self.qpn, RecvWr { wr_id: RECV_ID, sg_list: vec![Sge { addr: self.base, length: INFO_LEN, lkey: self.lkey }] })
    }

    fn send_info(&self) -> Result<()> {
        let addr = self.base + u64::from(INFO_LEN);
        self.dev.post_send(self.qpn, SendWr::new(SEND_ID, WrOpcode::Send, vec![Sge { addr, length: INFO_LEN, lkey: self.lkey }]))
    }

    /// Work through the QP's completions: each step of the ping as its completion comes.
    pub fn poll(&mut self) -> Result<()> {
        for wc in self.dev.poll_cq(self.cq, 16)? {
            if wc.status != WcStatus::Success {
                bail!("rping server: {:?} completed {:?}", wc.opcode, wc.status);
            }
            let ping = self.base + 2 * u64::from(INFO_LEN);
            match (self.step, wc.opcode) {
                (Step::ReadAdv | Step::WriteAdv, WcOpcode::Recv) => {
                    if wc.byte_len != INFO_LEN {
                        bail!("rping server: a receive of {} bytes, not {INFO_LEN}", wc.byte_len);
                    }
                    let b = self.dev.read_mem(self.base, INFO_LEN as usize)?;
                    let (addr, rkey, size) = (
                        u64::from_be_bytes(b[0..8].try_into().unwrap()),
                        u32::from_be_bytes(b[8..12].try_into().unwrap()),
                        u32::from_be_bytes(b[12..16].try_into().unwrap()),
                    );
                    self.post_recv()?;
                    let mut wr = if self.step == Step::ReadAdv {
                        if u64::from(size) > BUF || size == 0 {
                            bail!("rping server: a ping of {size} bytes");
                        }
                        self.size = size;
                        self.step = Step::Reading;
                        SendWr::new(RDMA_ID, WrOpcode::RdmaRead, vec![Sge { addr: ping, length: size, lkey: self.lkey }])
                    } else {
                        // what we read, up to and including its NUL (rping's strlen + 1)
                        let data = self.pings.last().cloned().unwrap_or_default();
                        let len = (data.len() as u32 + 1).min(self.size).min(size);
                        self.step = Step::Writing;
                        SendWr::new(RDMA_ID, WrOpcode::RdmaWrite, vec![Sge { addr: ping, length: len, lkey: self.lkey }])
                    };
                    (wr.remote_addr, wr.rkey) = (addr, rkey);
                    self.dev.post_send(self.qpn, wr)?;
                }
                (Step::Reading, WcOpcode::RdmaRead) => {
                    let d = self.dev.read_mem(ping, self.size as usize)?;
                    self.pings.push(d.split(|&c| c == 0).next().unwrap_or(&[]).to_vec());
                    self.step = Step::WriteAdv;
                    self.send_info()?;
                }
                (Step::Writing, WcOpcode::RdmaWrite) => {
                    self.step = Step::ReadAdv;
                    self.send_info()?;
                }
                (_, WcOpcode::Send) => {}
                (s, o) => bail!("rping server: {o:?} completed in step {s:?}"),
            }
        }
        Ok(())
    }
}

/// rping's client (`rping -c`) over any endpoint's verbs, for the VM's `rping -s`: the connection through the
/// CM agent's active side, then `count` pings of `size` bytes with rping's pattern, each checked when the
/// server has written it back (rping's `-V`).
pub struct RpingClient {
    dev: Dev,
    cq: Cq,
    pub qpn: u32,
    lkey: u32,
    rkey: u32,
    /// Receive buffer (16 bytes), send buffer (16), start buffer, sink buffer.
    base: u64,
    size: u32,
    count: u32,
    /// Pings done, and where the current one is: 0 start sent, 1 sink sent.
    pub done: u32,
    half: u8,
    psn: u32,
    pub mismatches: u32,
}

impl RpingClient {
    /// Buffers and an RC QP in INIT-to-be on `dev` (`psn`: the receive PSN our REQ advertises).
    pub fn new(dev: Dev, pd: Pd, size: u32, count: u32, psn: u32) -> Result<Self> {
        let len = 2 * u64::from(INFO_LEN) + 2 * u64::from(size);
        let base = dev.alloc(len as usize)?;
        let (lkey, rkey) = dev.reg_mr(pd, base, len, AccessFlags(AccessFlags::LOCAL_WRITE.0 | AccessFlags::REMOTE_READ.0 | AccessFlags::REMOTE_WRITE.0))?;
        let cq = dev.create_cq(64)?;
        let cap = QpCap { max_send_wr: 16, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
        let qpn = dev.create_qp(pd, QpInitAttr { qp_type: QpType::Rc, send_cq: cq, recv_cq: cq, cap, sq_sig_all: true })?;
        Ok(RpingClient { dev, cq, qpn, lkey, rkey, base, size, count, done: 0, half: 0, psn, mismatches: 0 })
    }

    fn start_buf(&self) -> u64 {
        self.base + 2 * u64::from(INFO_LEN)
    }

    fn sink_buf(&self) -> u64 {
        self.start_buf() + u64::from(self.size)
    }

    /// rping's start buffer for ping `n`: "rdma-ping-N: ", then letters from 'A' + n (wrapping after 'z'), a
    /// NUL last.
    pub fn pattern(n: u32, size: u32) -> Vec<u8> {
        let mut b = format!("rdma-ping-{n}: ").into_bytes();
        b.truncate(size as usize - 1);
        let mut c = 65 + (n % 58) as u8;
        while b.len() < size as usize {
            b.push(c);
            c = if c >= 122 { 65 } else { c + 1 };
        }
        b[size as usize - 1] = 0;
        b
    }

    /// The QP from the REP (`mac`/`peer`: the server's), a receive posted, then the agent's RTU and the
    /// first ping.
    pub fn connected(&mut self, agent: &mut super::cm::CmAgent, id: u32, rep: &testbench::wire::mad::CmRep, peer: std::net::Ipv4Addr, mac: MacAddr, mtu: u32) -> Result<()> {
        let av = testbench::model::AddressVector::new(mac, std::net::IpAddr::V4(peer));
        let [init, rtr, rts] = super::cm::qp_attrs_from_rep(rep, self.psn, mtu, 1, av);
        self.dev.modify_qp(self.qpn, &init)?;
        self.post_recv()?;
        self.dev.modify_qp(self.qpn, &rtr)?;
        self.dev.modify_qp(self.qpn, &rts)?;
        agent.ready_to_use(id)?;
        self.send_start()
    }

    fn post_recv(&self) -> Result<()> {
        self.dev.post_recv(self.qpn, RecvWr { wr_id: RECV_ID, sg_list: vec![Sge { addr: self.base, length: INFO_LEN, lkey: self.lkey }] })
    }

    fn send_info(&self, buf: u64) -> Result<()> {
        let mut info = buf.to_be_bytes().to_vec();
        info.extend(self.rkey.to_be_bytes());
        info.extend(self.size.to_be_bytes());
        let at = self.base + u64::from(INFO_LEN);
        self.dev.write_mem(at, &info)?;
        self.dev.post_send(self.qpn, SendWr::new(SEND_ID, WrOpcode::Send, vec![Sge { addr: at, length: INFO_LEN, lkey: self.lkey }]))
    }

    fn send_start(&mut self) -> Result<()> {
        self.dev.write_mem(self.start_buf(), &Self::pattern(self.done, self.size))?;
        self.dev.write_mem(self.sink_buf(), &vec![0u8; self.size as usize])?;
        self.half = 0;
        self.send_info(self.start_buf())
    }

    /// Work through the completions; true once `count` pings are done.
    pub fn poll(&mut self) -> Result<bool> {
        for wc in self.dev.poll_cq(self.cq, 16)? {
            if wc.status != WcStatus::Success {
                bail!("rping client: {:?} completed {:?}", wc.opcode, wc.status);
            }
            if wc.opcode != WcOpcode::Recv {
                continue;
            }
            if wc.byte_len != INFO_LEN {
                bail!("rping client: a receive of {} bytes, not {INFO_LEN}", wc.byte_len);
            }
            self.post_recv()?;
            if self.half == 0 {
                // the server has read the start buffer: offer the sink
                self.half = 1;
                self.send_info(self.sink_buf())?;
            } else {
                // the server has written the sink: it must hold the start buffer
                let (a, b) = (self.dev.read_mem(self.start_buf(), self.size as usize)?, self.dev.read_mem(self.sink_buf(), self.size as usize)?);
                self.mismatches += u32::from(a != b);
                self.done += 1;
                if self.done < self.count {
                    self.send_start()?;
                }
            }
        }
        Ok(self.done >= self.count)
    }

    /// Our QP to error, as rdma_cm's `rdma_disconnect` does before its DREQ.
    pub fn shut(&self) -> Result<()> {
        self.dev.modify_qp(self.qpn, &testbench::model::QpAttr { qp_state: Some(testbench::model::QpState::Error), ..Default::default() })
    }
}
