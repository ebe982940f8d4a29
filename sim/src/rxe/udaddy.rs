//! udaddy's server (librdmacm's `udaddy`, rdma-core 44) over any endpoint's verbs, for the VM's
//! `udaddy -s ADDR`: the client resolves our UD service by SIDR (the CM agent answers with this QP and rdma_cm's
//! UD Q_Key 0x01234567), sends `MESSAGES` UD SEND_WITH_IMMs of `SIZE` bytes (the immediate: its QPN), and
//! waits for as many replies, which the server sends to the sender's address (from the GRH area of the
//! first receive, as `ibv_create_ah_from_wc` takes it), QPN (the immediate) and rdma_cm's Q_Key.

use anyhow::{bail, Result};
use testbench::model::{AccessFlags, AddressVector, Cq, Pd, QpAttr, QpCap, QpInitAttr, QpState, QpType, RecvWr, SendWr, Sge, UdDest, WcOpcode, WcStatus, WrOpcode};
use testbench::wire::mad::RDMA_UDP_QKEY;

use super::cm::CmAgent;
use super::verbs::{Dev, UD_GRH_ROOM};

/// udaddy's defaults: 10 messages of 100 bytes each way.
pub const MESSAGES: u32 = 10;
pub const SIZE: u32 = 100;
/// udaddy's port (7174) in the UDP port space.
pub const PORT: u16 = 7174;

/// The UD service.
pub struct UdaddyServer {
    dev: Dev,
    cq: Cq,
    pub qpn: u32,
    lkey: u32,
    base: u64,
    pub received: u32,
    pub replies: u32,
    /// The client's address (from the first receive's GRH area) and QPN (its immediate).
    peer: Option<(std::net::Ipv4Addr, u32)>,
    replied: bool,
    /// Receives that did not hold what udaddy sends (length, immediate flag, GRH area).
    pub bad: u32,
}

const SLOT: u64 = 256;

impl UdaddyServer {
    /// A UD QP with rdma_cm's UD Q_Key, in RTS, its receives posted.
    pub fn new(dev: Dev, pd: Pd) -> Result<Self> {
        let len = 2 * u64::from(MESSAGES) * SLOT;
        let base = dev.alloc(len as usize)?;
        let (lkey, _) = dev.reg_mr(pd, base, len, AccessFlags::LOCAL_WRITE)?;
        let cq = dev.create_cq(4 * MESSAGES)?;
        let cap = QpCap { max_send_wr: MESSAGES, max_recv_wr: MESSAGES, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
        let qpn = dev.create_qp(pd, QpInitAttr { qp_type: QpType::Ud, send_cq: cq, recv_cq: cq, cap, sq_sig_all: true })?;
        dev.modify_qp(qpn, &QpAttr { qp_state: Some(QpState::Init), qkey: Some(RDMA_UDP_QKEY), ..Default::default() })?;
        dev.modify_qp(qpn, &QpAttr { qp_state: Some(QpState::Rtr), ..Default::default() })?;
        dev.modify_qp(qpn, &QpAttr { qp_state: Some(QpState::Rts), sq_psn: Some(0), ..Default::default() })?;
        for i in 0..MESSAGES {
            let addr = base + u64::from(i) * SLOT;
            dev.post_recv(qpn, RecvWr { wr_id: u64::from(i), sg_list: vec![Sge { addr, length: UD_GRH_ROOM + SIZE, lkey }] })?;
        }
        Ok(UdaddyServer { dev, cq, qpn, lkey, base, received: 0, replies: 0, peer: None, replied: false, bad: 0 })
    }

    /// Work through the completions; once every message came, the replies go out.
    pub fn poll(&mut self, agent: &mut CmAgent) -> Result<()> {
        for wc in self.dev.poll_cq(self.cq, 32)? {
            if wc.status != WcStatus::Success {
                bail!("udaddy server: {:?} completed {:?}", wc.opcode, wc.status);
            }
            match wc.opcode {
                WcOpcode::Send => self.replies += 1,
                WcOpcode::Recv => {
                    self.received += 1;
                    let g = self.dev.read_mem(self.base + wc.wr_id * SLOT, UD_GRH_ROOM as usize)?;
                    let ok = wc.byte_len == UD_GRH_ROOM + SIZE && wc.wc_flags.0 & testbench::model::WcFlags::WITH_IMM != 0 && g[20] == 0x45;
                    self.bad += u32::from(!ok);
                    if self.peer.is_none() {
                        self.peer = Some((std::net::Ipv4Addr::new(g[32], g[33], g[34], g[35]), wc.imm_data));
                    }
                }
                o => bail!("udaddy server: {o:?} completed"),
            }
        }
        if self.received == MESSAGES && !self.replied {
            self.replied = true;
            let (ip, qpn) = self.peer.unwrap();
            let av = AddressVector::new(agent.mac_of(ip)?, std::net::IpAddr::V4(ip));
            for i in 0..MESSAGES {
                let addr = self.base + u64::from(MESSAGES + i) * SLOT;
                self.dev.write_mem(addr, &vec![i as u8; SIZE as usize])?;
                let mut wr = SendWr::new(u64::from(i), WrOpcode::SendWithImm, vec![Sge { addr, length: SIZE, lkey: self.lkey }]);
                wr.imm_data = self.qpn;
                wr.ud = Some(UdDest { av: av.clone(), remote_qpn: qpn, remote_qkey: RDMA_UDP_QKEY });
                self.dev.post_send(self.qpn, wr)?;
            }
        }
        Ok(())
    }

    /// Every message came and every reply went.
    pub fn done(&self) -> bool {
        self.received == MESSAGES && self.replies == MESSAGES
    }
}

/// udaddy's client (`udaddy -s ADDR`) over any endpoint's verbs, for the VM's `udaddy` server: the service
/// resolved by the CM agent's SIDR request, then `MESSAGES` UD SEND_WITH_IMMs of `SIZE` bytes (the immediate:
/// our QPN) to the QPN and Q_Key of the SIDR_REP; the server's as many replies come back.
pub struct UdaddyClient {
    dev: Dev,
    cq: Cq,
    pub qpn: u32,
    lkey: u32,
    base: u64,
    pub sent: u32,
    pub received: u32,
    /// Replies not as udaddy sends them (length, GRH area).
    pub bad: u32,
}

impl UdaddyClient {
    /// A UD QP with rdma_cm's UD Q_Key (the one a SIDR_REP hands out), in RTS, its receives posted.
    pub fn new(dev: Dev, pd: Pd) -> Result<Self> {
        let s = UdaddyServer::new(dev, pd)?;
        Ok(UdaddyClient { dev: s.dev, cq: s.cq, qpn: s.qpn, lkey: s.lkey, base: s.base, sent: 0, received: 0, bad: 0 })
    }

    /// The SIDR_REP came: send the messages to the service.
    pub fn resolved(&mut self, rep: &testbench::wire::mad::CmSidrRep, peer: std::net::Ipv4Addr, mac: testbench::wire::MacAddr) -> Result<()> {
        if rep.status != 0 {
            bail!("udaddy client: SIDR_REP status {}", rep.status);
        }
        let av = AddressVector::new(mac, std::net::IpAddr::V4(peer));
        for i in 0..MESSAGES {
            let addr = self.base + u64::from(MESSAGES + i) * SLOT;
            self.dev.write_mem(addr, &vec![0x40 | i as u8; SIZE as usize])?;
            let mut wr = SendWr::new(u64::from(i), WrOpcode::SendWithImm, vec![Sge { addr, length: SIZE, lkey: self.lkey }]);
            wr.imm_data = self.qpn;
            wr.ud = Some(UdDest { av: av.clone(), remote_qpn: rep.qpn, remote_qkey: rep.qkey });
            self.dev.post_send(self.qpn, wr)?;
        }
        Ok(())
    }

    /// Work through the completions.
    pub fn poll(&mut self) -> Result<()> {
        for wc in self.dev.poll_cq(self.cq, 32)? {
            if wc.status != WcStatus::Success {
                bail!("udaddy client: {:?} completed {:?}", wc.opcode, wc.status);
            }
            match wc.opcode {
                WcOpcode::Send => self.sent += 1,
                WcOpcode::Recv => {
                    self.received += 1;
                    let g = self.dev.read_mem(self.base + wc.wr_id * SLOT, UD_GRH_ROOM as usize)?;
                    self.bad += u32::from(wc.byte_len != UD_GRH_ROOM + SIZE || g[20] != 0x45);
                }
                o => bail!("udaddy client: {o:?} completed"),
            }
        }
        Ok(())
    }
}
