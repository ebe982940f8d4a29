//! ucmatose's server (librdmacm's `ucmatose`, rdma-core 44) over any endpoint's verbs, for the VM's
//! `ucmatose -s ADDR`: each connection comes through the CM agent; on each, once established, the server
//! SENDs `MESSAGES` messages of `SIZE` bytes, takes as many back (the client's replies), then disconnects
//! (our DREQ), as ucmatose's `run_server` does. The client has its receives posted before it connects.

use anyhow::{bail, Result};
use testbench::model::{AccessFlags, Cq, Pd, QpAttr, QpCap, QpInitAttr, QpState, QpType, RecvWr, SendWr, Sge, WcOpcode, WcStatus, WrOpcode};
use testbench::wire::mad::CmReq;
use testbench::wire::MacAddr;

use super::cm::{qp_attrs_from_req, CmAgent};
use super::verbs::Dev;

/// ucmatose's defaults: 10 messages of 100 bytes each way per connection.
pub const MESSAGES: u32 = 10;
pub const SIZE: u32 = 100;
/// ucmatose's port (7471) in the TCP port space.
pub const PORT: u16 = 7471;

/// A connection's buffers (our messages, then the peer's) and RC QP: (buffer, lkey, CQ, QPN).
fn rc_qp(dev: &Dev, pd: Pd) -> Result<(u64, u32, Cq, u32)> {
    let len = u64::from(2 * MESSAGES * SIZE);
    let base = dev.alloc(len as usize)?;
    let (lkey, _) = dev.reg_mr(pd, base, len, AccessFlags::LOCAL_WRITE)?;
    let cq = dev.create_cq(4 * MESSAGES)?;
    let cap = QpCap { max_send_wr: MESSAGES, max_recv_wr: MESSAGES, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let qpn = dev.create_qp(pd, QpInitAttr { qp_type: QpType::Rc, send_cq: cq, recv_cq: cq, cap, sq_sig_all: true })?;
    Ok((base, lkey, cq, qpn))
}

/// The receives for the peer's messages, in the second half of the buffer.
fn post_recvs(dev: &Dev, qpn: u32, base: u64, lkey: u32) -> Result<()> {
    for i in 0..MESSAGES {
        let addr = base + u64::from((MESSAGES + i) * SIZE);
        dev.post_recv(qpn, RecvWr { wr_id: u64::from(i), sg_list: vec![Sge { addr, length: SIZE, lkey }] })?;
    }
    Ok(())
}

/// One ucmatose connection, server side.
pub struct CmatoseServer {
    dev: Dev,
    cq: Cq,
    pub id: u32,
    pub qpn: u32,
    lkey: u32,
    base: u64,
    sends_done: u32,
    pub received: u32,
    started: bool,
    pub finished: bool,
}

impl CmatoseServer {
    /// Take connection request `id`: a QP from the REQ, the receives for the client's replies posted, then
    /// the agent's REP.
    #[allow(clippy::too_many_arguments)]
    pub fn accept(dev: Dev, pd: Pd, agent: &mut CmAgent, id: u32, req: &CmReq, peer: std::net::Ipv4Addr, mac: MacAddr, psn: u32) -> Result<Self> {
        let (base, lkey, cq, qpn) = rc_qp(&dev, pd)?;
        let [init, rtr, rts] = qp_attrs_from_req(req, psn, testbench::model::AddressVector::new(mac, std::net::IpAddr::V4(peer)));
        dev.modify_qp(qpn, &init)?;
        post_recvs(&dev, qpn, base, lkey)?;
        dev.modify_qp(qpn, &rtr)?;
        dev.modify_qp(qpn, &rts)?;
        agent.accept(id, req, qpn, psn)?;
        Ok(CmatoseServer { dev, cq, id, qpn, lkey, base, sends_done: 0, received: 0, started: false, finished: false })
    }

    /// The connection is established: send the messages.
    pub fn start(&mut self) -> Result<()> {
        self.started = true;
        for i in 0..MESSAGES {
            let addr = self.base + u64::from(i * SIZE);
            self.dev.write_mem(addr, &vec![i as u8; SIZE as usize])?;
            self.dev.post_send(self.qpn, SendWr::new(u64::from(i), WrOpcode::Send, vec![Sge { addr, length: SIZE, lkey: self.lkey }]))?;
        }
        Ok(())
    }

    /// Work through the completions; once every message went and every reply came, our QP goes to error and
    /// the agent sends the DREQ (ucmatose's `rdma_disconnect`).
    pub fn poll(&mut self, agent: &mut CmAgent) -> Result<()> {
        for wc in self.dev.poll_cq(self.cq, 32)? {
            if wc.status != WcStatus::Success {
                bail!("ucmatose server: {:?} completed {:?}", wc.opcode, wc.status);
            }
            match wc.opcode {
                WcOpcode::Send => self.sends_done += 1,
                WcOpcode::Recv if wc.byte_len == SIZE => self.received += 1,
                o => bail!("ucmatose server: {o:?} of {} bytes", wc.byte_len),
            }
        }
        if self.started && !self.finished && self.sends_done == MESSAGES && self.received == MESSAGES {
            self.finished = true;
            self.dev.modify_qp(self.qpn, &QpAttr { qp_state: Some(QpState::Error), ..Default::default() })?;
            agent.disconnect(self.id)?;
        }
        Ok(())
    }
}

/// ucmatose's client (`ucmatose -s ADDR`) over any endpoint's verbs, for the VM's `ucmatose` server: one
/// connection (of several, each its own) through the CM agent's active side; its receives posted before the
/// RTU; once `MESSAGES` came it SENDs as many replies; the server's DREQ ends it (the agent's DREP).
pub struct CmatoseClient {
    dev: Dev,
    cq: Cq,
    pub qpn: u32,
    lkey: u32,
    base: u64,
    psn: u32,
    pub id: u32,
    pub received: u32,
    pub replies: u32,
}

impl CmatoseClient {
    /// Buffers and an RC QP; then [`CmAgent::connect`] to `peer`'s ucmatose port.
    pub fn connect(dev: Dev, pd: Pd, agent: &mut CmAgent, peer: std::net::Ipv4Addr, psn: u32) -> Result<Self> {
        let (base, lkey, cq, qpn) = rc_qp(&dev, pd)?;
        let sid = testbench::wire::mad::service_id(testbench::wire::mad::RDMA_PS_TCP, PORT);
        let id = agent.connect(peer, sid, qpn, psn, 1024, 1, 0xC000 | qpn as u16)?;
        Ok(CmatoseClient { dev, cq, qpn, lkey, base, psn, id, received: 0, replies: 0 })
    }

    /// The REP came: the QP from it with the receives posted, then the RTU.
    pub fn connected(&mut self, agent: &mut CmAgent, rep: &testbench::wire::mad::CmRep, peer: std::net::Ipv4Addr, mac: MacAddr) -> Result<()> {
        let av = testbench::model::AddressVector::new(mac, std::net::IpAddr::V4(peer));
        let [init, rtr, rts] = super::cm::qp_attrs_from_rep(rep, self.psn, 1024, 1, av);
        self.dev.modify_qp(self.qpn, &init)?;
        post_recvs(&self.dev, self.qpn, self.base, self.lkey)?;
        self.dev.modify_qp(self.qpn, &rtr)?;
        self.dev.modify_qp(self.qpn, &rts)?;
        agent.ready_to_use(self.id)
    }

    /// Work through the completions; once every message came, the replies go.
    pub fn poll(&mut self) -> Result<()> {
        for wc in self.dev.poll_cq(self.cq, 32)? {
            if wc.status != WcStatus::Success {
                bail!("ucmatose client: {:?} completed {:?}", wc.opcode, wc.status);
            }
            match wc.opcode {
                WcOpcode::Send => self.replies += 1,
                WcOpcode::Recv if wc.byte_len == SIZE => {
                    self.received += 1;
                    if self.received == MESSAGES {
                        for i in 0..MESSAGES {
                            let addr = self.base + u64::from(i * SIZE);
                            self.dev.write_mem(addr, &vec![0x80 | i as u8; SIZE as usize])?;
                            self.dev.post_send(self.qpn, SendWr::new(u64::from(i), WrOpcode::Send, vec![Sge { addr, length: SIZE, lkey: self.lkey }]))?;
                        }
                    }
                }
                o => bail!("ucmatose client: {o:?} of {} bytes", wc.byte_len),
            }
        }
        Ok(())
    }
}
