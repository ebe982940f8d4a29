//! perftest's `-R` (`--rdma_cm`) on our side: every connection through the CM agent ([`super::cm`]), no TCP.
//!
//! With `-R` the perftest tools (Debian perftest 4.5+0.17, "6.06"; `perftest_parameters.c` turns `-R` into
//! `use_rdma_cm` as well) connect twice through rdma_cm, both times to the service ID of port `-p` in the TCP
//! port space:
//!
//! 1. **The exchange** (`establish_connection` → `rdma_client_connect` / `rdma_server_connect`): one RC QP,
//!    no responder resources, retry and RNR retry 7. The server takes the first REQ and accepts it without
//!    waiting for the RTU. Every exchange of the TCP protocol ([`super::perftest`]) then goes as one SEND
//!    (`rdma_write_data` / `rdma_write_keys`) into the peer's single posted receive of 56 bytes
//!    (`post_one_recv_wqe`: `sizeof(struct pingpong_dest)`), reposted after each read. The order is the same:
//!    the client writes first, the server reads first. So each side always has its receive posted when the
//!    other's message comes.
//! 2. **The test QPs** (`create_rdma_cm_connection`): one exchange of the key record as a barrier, then
//!    the connection, then another barrier. The client's REQ offers `out_reads` responder resources for READ
//!    and atomics (none otherwise). The client retries a rejected REQ (`rdma_cm_client_connection`: 10 times,
//!    100 ms apart), since the server only listens after its barrier. The server accepts, then sets
//!    `min_rnr_timer` 12.
//!
//! The key records are then binary (`rdma_write_keys`, `HAVE_ENDIAN`): [`Dest::encode_bin`]. `ctx_connect` is
//! skipped (the QPs are rdma_cm's), and `ctx_close_connection` is the last barrier alone, without TCP's
//! "done". At the end the client disconnects its test QPs (`rdma_cm_disconnect_nodes`: DREQ, then it waits
//! for DISCONNECTED); destroying the remaining rdma_cm IDs sends the DREQs of whatever is still connected.
//!
//! [`Dest::encode_bin`]: super::perftest::Dest::encode_bin

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use testbench::model::{AccessFlags, AddressVector, Cq, QpCap, QpInitAttr, QpState, QpType, RecvWr, SendWr, Sge, WcOpcode, WcStatus, WrOpcode};
use testbench::wire::mad::{CmRep, CmReq};

use super::cm::{qp_attrs_from_rep, qp_attrs_from_req, CmAgent, CmEvent, REJ_INVALID_SERVICE_ID};
use super::oob::OobConn;
use super::verbs::Dev;

/// perftest's receive for each exchange message: `sizeof(struct pingpong_dest)`.
pub const MSG_LEN: u32 = 56;
/// How long a rejected REQ waits before it goes again (perftest: 100 ms).
const RETRY_AFTER: Duration = Duration::from_millis(100);

/// The CM agent with the events nobody has taken yet; shared by the exchange and the test QP of every run
/// of a batch (there is one QP1 per device).
pub struct CmHub {
    pub agent: CmAgent,
    queue: VecDeque<CmEvent>,
    /// Every event, in order, for the report.
    pub log: Vec<CmEvent>,
}

pub type SharedHub = Arc<Mutex<CmHub>>;

impl CmHub {
    pub fn new(agent: CmAgent) -> SharedHub {
        Arc::new(Mutex::new(CmHub { agent, queue: VecDeque::new(), log: Vec::new() }))
    }

    /// The events logged so far, each in brief ([`brief`]), taken out of the log.
    pub fn take_log(&mut self) -> Vec<String> {
        self.log.drain(..).map(|e| brief(&e)).collect()
    }

    /// Answer what came on QP1; queue its events.
    fn pump(&mut self) -> Result<()> {
        for ev in self.agent.poll()? {
            self.log.push(ev.clone());
            self.queue.push_back(ev);
        }
        Ok(())
    }

    /// Take the first queued event `want` picks.
    fn take(&mut self, want: &dyn Fn(&CmEvent) -> bool) -> Option<CmEvent> {
        let i = self.queue.iter().position(want)?;
        self.queue.remove(i)
    }
}

/// One line for an event of the run's report: what came (REQ, RTU, REP, REJ with its reason, DISCONNECTED,
/// UNREACHABLE) and the connection's ID.
pub fn brief(ev: &CmEvent) -> String {
    match ev {
        CmEvent::ConnectRequest { id, req, peer } => format!("REQ 0x{id:08x} from {peer} QP 0x{:x}", req.local_qpn),
        CmEvent::Established { id } => format!("RTU 0x{id:08x}"),
        CmEvent::Disconnected { id } => format!("DISCONNECTED 0x{id:08x}"),
        CmEvent::ConnectReply { id, rep } => format!("REP 0x{id:08x} QP 0x{:x}", rep.local_qpn),
        CmEvent::Rejected { id, reason } => format!("REJ 0x{id:08x} reason {reason}"),
        CmEvent::Unreachable { id } => format!("UNREACHABLE 0x{id:08x}"),
        CmEvent::SidrReply { request_id, .. } => format!("SIDR_REP 0x{request_id:08x}"),
        CmEvent::SidrRequest { req, .. } => format!("SIDR_REQ 0x{:08x}", req.request_id),
    }
}

/// Wait (until `deadline`) for the event `want` picks, the agent answering everything else meanwhile.
pub fn wait_event(hub: &SharedHub, want: &dyn Fn(&CmEvent) -> bool, deadline: Instant, what: &str) -> Result<CmEvent> {
    loop {
        {
            let mut h = hub.lock().unwrap();
            h.pump()?;
            if let Some(ev) = h.take(want) {
                return Ok(ev);
            }
        }
        if Instant::now() > deadline {
            bail!("no {what} in time");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Answer QP1 for a while: what a peer's last DREQs need once our side is done.
pub fn serve(hub: &SharedHub, d: Duration) -> Result<()> {
    let end = Instant::now() + d;
    while Instant::now() < end {
        hub.lock().unwrap().pump()?;
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// The passive side: the next REQ for `sid` (the first for the exchange, the next for the test QP).
pub fn next_request(hub: &SharedHub, sid: u64, deadline: Instant, what: &str) -> Result<(u32, CmReq, Ipv4Addr)> {
    match wait_event(hub, &|e| matches!(e, CmEvent::ConnectRequest { req, .. } if req.service_id == sid), deadline, what)? {
        CmEvent::ConnectRequest { id, req, peer } => Ok((id, req, peer)),
        _ => unreachable!(),
    }
}

/// The active side: connect `qpn` (created, not yet in INIT) to service `sid` at `peer` as rdma_cm does,
/// asking again after a REJ 8 (the peer not listening yet) or while its MAC is unknown (the VM still
/// booting), until `deadline`; `on_rep` sets the QP up from the REP (before the RTU goes). Returns the
/// connection's ID and the REP.
#[allow(clippy::too_many_arguments)]
pub fn connect(
    hub: &SharedHub,
    peer: Ipv4Addr,
    sid: u64,
    qpn: u32,
    psn: u32,
    mtu: u32,
    depth: u8,
    deadline: Instant,
    on_rep: &mut dyn FnMut(&CmRep, AddressVector) -> Result<()>,
) -> Result<(u32, CmRep)> {
    let mut rejected = 0;
    loop {
        if Instant::now() > deadline {
            bail!("service 0x{sid:016x} at {peer} not reached in time ({rejected} REJ 8 while it did not listen)");
        }
        let id = {
            let mut h = hub.lock().unwrap();
            if h.agent.mac_of(peer).is_err() {
                drop(h);
                std::thread::sleep(RETRY_AFTER);
                continue;
            }
            h.agent.connect(peer, sid, qpn, psn, mtu, depth, 0xC000 | (qpn as u16 & 0x3FFF))?
        };
        let ev = wait_event(
            hub,
            &|e| matches!(e, CmEvent::ConnectReply { id: i, .. } | CmEvent::Rejected { id: i, .. } | CmEvent::Unreachable { id: i } if *i == id),
            deadline,
            "answer to our REQ",
        )?;
        match ev {
            CmEvent::ConnectReply { rep, .. } => {
                let mut h = hub.lock().unwrap();
                let mac = h.agent.mac_of(peer)?;
                on_rep(&rep, AddressVector::new(mac, IpAddr::V4(peer)))?;
                h.agent.ready_to_use(id)?;
                return Ok((id, rep));
            }
            CmEvent::Rejected { reason: REJ_INVALID_SERVICE_ID, .. } => {
                rejected += 1;
                std::thread::sleep(RETRY_AFTER);
            }
            other => bail!("connecting to service 0x{sid:016x} at {peer}: {other:?}"),
        }
    }
}

/// Accept connection request `id` with `qpn` (created, not yet in INIT), set up from the REQ; `before_rtr`
/// runs in INIT (receives to post). Our receive PSN is `psn`.
pub fn accept(hub: &SharedHub, dev: &Dev, id: u32, req: &CmReq, peer: Ipv4Addr, qpn: u32, psn: u32, before_rtr: &mut dyn FnMut() -> Result<()>) -> Result<()> {
    let mut h = hub.lock().unwrap();
    let mac = h.agent.mac_of(peer)?;
    let [init, rtr, rts] = qp_attrs_from_req(req, psn, AddressVector::new(mac, IpAddr::V4(peer)));
    dev.modify_qp(qpn, &init).context("modify_qp INIT")?;
    before_rtr()?;
    dev.modify_qp(qpn, &rtr).context("modify_qp RTR")?;
    dev.modify_qp(qpn, &rts).context("modify_qp RTS")?;
    h.agent.accept(id, req, qpn, psn)
}

/// End connection `id` from our side (the QP to ERROR first, as `rdma_disconnect` does) and wait for its
/// DREP (or the peer's own DREQ) until `deadline`.
pub fn disconnect(hub: &SharedHub, dev: &Dev, id: u32, qpn: u32, deadline: Instant) -> Result<()> {
    dev.modify_qp(qpn, &testbench::model::QpAttr { qp_state: Some(QpState::Error), ..Default::default() })?;
    {
        let mut h = hub.lock().unwrap();
        h.pump()?;
        // the peer may have disconnected it meanwhile
        if h.take(&|e| matches!(e, CmEvent::Disconnected { id: i } if *i == id)).is_some() {
            return Ok(());
        }
        h.agent.disconnect(id)?;
    }
    wait_event(hub, &|e| matches!(e, CmEvent::Disconnected { id: i } if *i == id), deadline, "DREP").map(|_| ())
}

/// Whether connection `id` has been disconnected (the event taken).
pub fn take_disconnected(hub: &SharedHub, id: u32) -> Result<bool> {
    let mut h = hub.lock().unwrap();
    h.pump()?;
    Ok(h.take(&|e| matches!(e, CmEvent::Disconnected { id: i } if *i == id)).is_some())
}

const RECV_ID: u64 = 1;
const SEND_ID: u64 = 2;

/// perftest's exchange over rdma_cm: an RC QP whose every message is one SEND into the peer's one posted
/// receive ([`MSG_LEN`] bytes). As an [`OobConn`], `send_all` is one message and `recv_exact(n)` takes one
/// message, which must be `n` bytes.
pub struct CmComm {
    hub: SharedHub,
    dev: Dev,
    pub qpn: u32,
    scq: Cq,
    rcq: Cq,
    lkey: u32,
    /// Receive buffer, then send buffer.
    base: u64,
    /// The connection's ID.
    pub id: u32,
}

impl CmComm {
    fn new(hub: &SharedHub, dev: &Dev) -> Result<CmComm> {
        let base = dev.alloc(4096)?;
        let pd = dev.alloc_pd()?;
        let (lkey, _) = dev.reg_mr(pd, base, 4096, AccessFlags::LOCAL_WRITE)?;
        let scq = dev.create_cq(4)?;
        let rcq = dev.create_cq(4)?;
        let cap = QpCap { max_send_wr: 2, max_recv_wr: 2, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
        let qpn = dev.create_qp(pd, QpInitAttr { qp_type: QpType::Rc, send_cq: scq, recv_cq: rcq, cap, sq_sig_all: true })?;
        Ok(CmComm { hub: hub.clone(), dev: dev.clone(), qpn, scq, rcq, lkey, base, id: 0 })
    }

    fn post_recv(&self) -> Result<()> {
        self.dev.post_recv(self.qpn, RecvWr { wr_id: RECV_ID, sg_list: vec![Sge { addr: self.base, length: MSG_LEN, lkey: self.lkey }] })
    }

    /// perftest's server (`rdma_server_connect`): the first REQ for `sid` is the exchange's; accepted with
    /// one receive posted, not waiting for the RTU.
    pub fn accept(hub: &SharedHub, dev: &Dev, sid: u64, psn: u32, deadline: Instant) -> Result<CmComm> {
        let mut c = CmComm::new(hub, dev)?;
        let (id, req, peer) = next_request(hub, sid, deadline, "REQ of the exchange")?;
        accept(hub, dev, id, &req, peer, c.qpn, psn, &mut || c.post_recv())?;
        c.id = id;
        Ok(c)
    }

    /// perftest's client (`rdma_client_connect`): connect to `sid` at `peer` (no responder resources), one
    /// receive posted before the RTU.
    pub fn connect(hub: &SharedHub, dev: &Dev, peer: Ipv4Addr, sid: u64, psn: u32, mtu: u32, deadline: Instant) -> Result<CmComm> {
        let mut c = CmComm::new(hub, dev)?;
        let (id, _) = connect(hub, peer, sid, c.qpn, psn, mtu, 0, deadline, &mut |rep, av| {
            let [init, rtr, rts] = qp_attrs_from_rep(rep, psn, mtu, 0, av);
            c.dev.modify_qp(c.qpn, &init)?;
            c.post_recv()?;
            c.dev.modify_qp(c.qpn, &rtr)?;
            c.dev.modify_qp(c.qpn, &rts)
        })?;
        c.id = id;
        Ok(c)
    }

    /// Wait for one completion on `cq` until `timeout`, the agent served meanwhile; a disconnect of the
    /// exchange is an error.
    fn wait_wc(&self, cq: Cq, timeout: Duration, what: &str) -> Result<testbench::model::WorkCompletion> {
        let end = Instant::now() + timeout;
        loop {
            if let Some(wc) = self.dev.poll_cq(cq, 1)?.pop() {
                if wc.status != WcStatus::Success {
                    bail!("the exchange's {what} completed {:?}", wc.status);
                }
                return Ok(wc);
            }
            if take_disconnected(&self.hub, self.id)? {
                bail!("the peer disconnected the exchange while we waited for its {what}");
            }
            if Instant::now() > end {
                bail!("no {what} on the exchange in time");
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

impl OobConn for CmComm {
    fn send_all(&self, data: &[u8], timeout: Duration) -> Result<()> {
        anyhow::ensure!(data.len() <= MSG_LEN as usize, "an exchange message of {} bytes (perftest receives {MSG_LEN})", data.len());
        let addr = self.base + 2048;
        self.dev.write_mem(addr, data)?;
        self.dev.post_send(self.qpn, SendWr::new(SEND_ID, WrOpcode::Send, vec![Sge { addr, length: data.len() as u32, lkey: self.lkey }]))?;
        let wc = self.wait_wc(self.scq, timeout, "SEND completion")?;
        anyhow::ensure!(wc.opcode == WcOpcode::Send, "the exchange's send completion is {:?}", wc.opcode);
        Ok(())
    }

    fn recv_exact(&self, n: usize, timeout: Duration) -> Result<Vec<u8>> {
        let wc = self.wait_wc(self.rcq, timeout, "message")?;
        anyhow::ensure!(wc.opcode == WcOpcode::Recv, "the exchange's receive completion is {:?}", wc.opcode);
        anyhow::ensure!(wc.byte_len as usize == n, "the peer's message is {} bytes, not the {n} of this step", wc.byte_len);
        let b = self.dev.read_mem(self.base, n)?;
        self.post_recv()?;
        Ok(b)
    }

    fn flush(&self, _timeout: Duration) -> Result<()> {
        Ok(())
    }

    fn close(&self) {}

    fn abort(&self) {
        // the peer's tool learns of it from the DREQ (or its next SEND failing)
        let _ = disconnect(&self.hub, &self.dev, self.id, self.qpn, Instant::now() + Duration::from_secs(1));
    }
}
