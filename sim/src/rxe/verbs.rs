//! The verbs our side of an rxe run needs, over either endpoint: the golden model ([`SharedDevice`]) or the
//! Verilator RNIC driven through its host interface ([`super::rtl_ep::RtlDevice`]).
//!
//! The pingpong and perftest peers are written once against [`Verbs`]; `rnic rxe --endpoint model|rtl` picks
//! the implementation. Every call takes `&self` (each implementation locks or messages its device), so the
//! application thread and the bridge thread share one device.

use std::sync::Arc;

use anyhow::{anyhow, Result};
use testbench::model::{
    AccessFlags, Counters, Cq, Pd, QpAttr, QpInitAttr, QpType, RecvWr, SendWr, WorkCompletion,
};

pub use rnic_driver::cm::CmVerbs;

use super::model_ep::SharedDevice;

/// A device our peers can drive: the verbs the CM agent needs ([`CmVerbs`], the driver crate's), QP creation,
/// and what the lab reports.
pub trait Verbs: CmVerbs + Send + Sync {
    fn create_qp(&self, pd: Pd, init: QpInitAttr) -> Result<u32>;
    /// A fast-registration MR (the only kind a received SEND_WITH_INV may invalidate): (lkey, rkey).
    fn reg_mr_fast(&self, pd: Pd, addr: u64, len: u64, access: AccessFlags) -> Result<(u32, u32)>;
    /// `ibv_alloc_mw` of type 1: the window's rkey.
    fn alloc_mw(&self, pd: Pd) -> Result<u32>;
    /// `ibv_bind_mw` of a type 1 window (its current rkey) on QP `qpn` over `len` bytes at `addr` of the MR
    /// `mr`: the window's new rkey.
    fn bind_mw(&self, qpn: u32, mw: u32, mr: u32, addr: u64, len: u64, access: AccessFlags) -> Result<u32>;
    /// `ibv_alloc_mw` of type 2 (bound by a BIND_MW send WQE): the window's rkey.
    fn alloc_mw2(&self, pd: Pd) -> Result<u32>;
    /// What the endpoint is, for reports ("golden model", "RTL (Verilator)").
    fn describe(&self) -> String;
    /// The endpoint's own event counters, named (the model's counters; the RTL's counter window).
    fn counters(&self) -> Vec<(String, u64)>;
    /// The golden model's counters, when the endpoint is the model.
    fn model_counters(&self) -> Option<Counters> {
        None
    }
    /// Frames the endpoint dropped for a reason that a lossless link cannot cause (bad ICRC, overflow,
    /// out-of-sequence, ...), by name; empty on a clean run.
    fn unexpected_drops(&self) -> Vec<(String, u64)> {
        Vec::new()
    }
    /// The frames from the link the endpoint has been offered and not yet taken in, when it is slower than
    /// wall time (the RTL); the VM's link pauses the VM on it ([`super::Session::start_paced`]).
    fn inbound_backlog(&self) -> Option<super::Backlog> {
        None
    }
}

/// The device handle the peers hold.
pub type Dev = Arc<dyn Verbs>;

impl CmVerbs for SharedDevice {
    fn alloc(&self, len: usize) -> Result<u64> {
        Ok(self.lock().alloc(len))
    }
    fn write_mem(&self, addr: u64, data: &[u8]) -> Result<()> {
        self.lock().mem_mut().write(addr, data).map_err(|e| anyhow!("{e}"))
    }
    fn read_mem(&self, addr: u64, len: usize) -> Result<Vec<u8>> {
        self.lock().mem().read(addr, len).map_err(|e| anyhow!("{e}"))
    }
    fn alloc_pd(&self) -> Result<Pd> {
        Ok(self.lock().alloc_pd())
    }
    fn reg_mr(&self, pd: Pd, addr: u64, len: u64, access: AccessFlags) -> Result<(u32, u32)> {
        let mr = self.lock().reg_mr(pd, addr, len, access).map_err(|e| anyhow!("reg_mr: {e}"))?;
        Ok((mr.lkey, mr.rkey))
    }
    fn create_cq(&self, cqe: u32) -> Result<Cq> {
        Ok(self.lock().create_cq(cqe))
    }
    fn modify_qp(&self, qpn: u32, attr: &QpAttr) -> Result<()> {
        self.lock().modify_qp(qpn, attr).map_err(|e| anyhow!("modify_qp: {e}"))
    }
    fn post_send(&self, qpn: u32, wr: SendWr) -> Result<()> {
        self.lock().post_send(qpn, wr).map_err(|e| anyhow!("post_send: {e}"))
    }
    fn post_recv(&self, qpn: u32, wr: RecvWr) -> Result<()> {
        self.lock().post_recv(qpn, wr).map_err(|e| anyhow!("post_recv: {e}"))
    }
    fn poll_cq(&self, cq: Cq, max: usize) -> Result<Vec<WorkCompletion>> {
        Ok(self.lock().poll_cq(cq, max))
    }
}

impl Verbs for SharedDevice {
    fn alloc_mw(&self, pd: Pd) -> Result<u32> {
        self.lock().alloc_mw(pd).map_err(|e| anyhow!("alloc_mw: {e}"))
    }
    fn alloc_mw2(&self, pd: Pd) -> Result<u32> {
        self.lock().alloc_mw2(pd).map_err(|e| anyhow!("alloc_mw2: {e}"))
    }
    fn bind_mw(&self, qpn: u32, mw: u32, mr: u32, addr: u64, len: u64, access: AccessFlags) -> Result<u32> {
        self.lock().bind_mw(qpn, mw, mr, addr, len, access).map_err(|e| anyhow!("bind_mw: {e}"))
    }
    fn reg_mr_fast(&self, pd: Pd, addr: u64, len: u64, access: AccessFlags) -> Result<(u32, u32)> {
        let mr = self.lock().reg_mr_fast(pd, addr, len, access).map_err(|e| anyhow!("reg_mr_fast: {e}"))?;
        Ok((mr.lkey, mr.rkey))
    }
    fn create_qp(&self, pd: Pd, init: QpInitAttr) -> Result<u32> {
        self.lock().create_qp(pd, init).map_err(|e| anyhow!("create_qp: {e}"))
    }
    fn describe(&self) -> String {
        "golden model".into()
    }
    fn counters(&self) -> Vec<(String, u64)> {
        let c = self.lock().counters().clone();
        let mut v = vec![
            ("rx_frames".to_string(), c.rx_frames),
            ("tx_frames".into(), c.tx_frames),
            ("tx_request_packets".into(), c.tx_request_packets),
            ("tx_retransmitted_packets".into(), c.tx_retransmitted_packets),
            ("timeouts".into(), c.timeouts),
            ("acks_sent".into(), c.acks_sent),
            ("acks_received".into(), c.acks_received),
            ("duplicate_requests".into(), c.duplicate_requests),
            ("read_responses_sent".into(), c.read_responses_sent),
            ("atomic_acks_sent".into(), c.atomic_acks_sent),
        ];
        v.extend(c.drops.iter().map(|(r, n)| (format!("drop {r:?}"), *n)));
        v
    }
    fn model_counters(&self) -> Option<Counters> {
        Some(self.lock().counters().clone())
    }
}

/// Which device plays our side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EndpointKind {
    /// The golden transport model.
    #[default]
    Model,
    /// The Verilator model of the RNIC's Verilog, through the driver.
    Rtl,
    /// The same core inside the U250 board shell, with models of the PCIe bridge and the 100G MAC at the
    /// vendor IPs' ports (`sim::board`).
    BoardSim,
    /// The card's host code path ([`super::card_ep::CardDevice`]: the driver in the application's thread over
    /// a register bus and DMA memory, the tools' exchange over the host's network). In the lab its backends
    /// are the simulated board's (the board shell as in `BoardSim`); on the card, VFIO's.
    Board,
    /// The same code path over the card itself (the BAR and DMA memory through VFIO), against a remote rxe
    /// host whose tool the user starts: `rnic rxe --endpoint board --pci BDF --peer IP`. Timers as against the
    /// model (both sides in wall time).
    Card,
}

impl EndpointKind {
    /// The RTL, bare or in the board shell (timers and budgets by the RTL's simulated clock).
    pub fn is_rtl(self) -> bool {
        matches!(self, EndpointKind::Rtl | EndpointKind::BoardSim | EndpointKind::Board)
    }
    /// The tools' exchange goes over the host's network (a second NIC in the lab's VM), not the RoCE link.
    pub fn oob_over_net(self) -> bool {
        matches!(self, EndpointKind::Board | EndpointKind::Card)
    }
}

impl std::str::FromStr for EndpointKind {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "model" => Ok(EndpointKind::Model),
            "rtl" => Ok(EndpointKind::Rtl),
            "board-sim" => Ok(EndpointKind::BoardSim),
            "board" => Ok(EndpointKind::Board),
            other => anyhow::bail!("unknown endpoint `{other}` (model, rtl, board-sim or board)"),
        }
    }
}

impl std::fmt::Display for EndpointKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EndpointKind::Model => "model",
            EndpointKind::Rtl => "rtl",
            EndpointKind::BoardSim => "board-sim",
            EndpointKind::Board => "board",
            EndpointKind::Card => "card",
        })
    }
}

/// The transport of the tools' QPs: perftest's `-c` (`change_conn_type`), or which of rdma-core's pingpong
/// examples runs (`ibv_rc_pingpong`, `ibv_uc_pingpong`, `ibv_ud_pingpong`). Our side creates its QP with the
/// same type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Conn {
    /// Reliable Connected: ACKs, retransmission, RNR NAKs, READ and atomics.
    #[default]
    Rc,
    /// Unreliable Connected: SEND and RDMA WRITE only; no ACK, no retransmission, and a SEND that finds no
    /// receive posted is dropped (no RNR NAK), so a run must keep enough receives posted to lose nothing.
    Uc,
    /// Unreliable Datagram: SEND only, one packet per message (at most the port's MTU), each SEND addressed
    /// by the work request (address handle, remote QPN, Q_Key); every receive gets the 40-byte GRH area in
    /// front of the payload. No ACK, no retransmission.
    Ud,
}

/// The Q_Key both perftest (`DEF_QKEY`) and `ud_pingpong.c` give their UD QPs and put in their SENDs.
pub const UD_QKEY: u32 = 0x1111_1111;
/// The room a UD receive needs in front of the payload for the GRH (perftest's `UD_ADDITION`).
pub const UD_GRH_ROOM: u32 = 40;

impl Conn {
    pub fn qp_type(self) -> QpType {
        match self {
            Conn::Rc => QpType::Rc,
            Conn::Uc => QpType::Uc,
            Conn::Ud => QpType::Ud,
        }
    }

    /// The name perftest's `-c` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Conn::Rc => "RC",
            Conn::Uc => "UC",
            Conn::Ud => "UD",
        }
    }

}

impl std::str::FromStr for Conn {
    type Err = anyhow::Error;
    /// perftest's names (`RC`, `UC`, `UD`; case-insensitive here).
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_uppercase().as_str() {
            "RC" => Ok(Conn::Rc),
            "UC" => Ok(Conn::Uc),
            "UD" => Ok(Conn::Ud),
            _ => anyhow::bail!("unknown connection type `{s}` (RC, UC or UD)"),
        }
    }
}

impl std::fmt::Display for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The bridge's side of an endpoint.
pub type BoxedEndpoint = Box<dyn super::Endpoint + Send>;

/// Open our side: the device for the application and the endpoint for the bridge. `model` configures the
/// golden model (its MAC and IP are the RTL's too); the RTL takes the VM's frames at
/// [`super::rtl_ep::INBOUND_GBPS`].
pub fn open_endpoint(kind: EndpointKind, model: testbench::model::DeviceConfig) -> Result<(Dev, BoxedEndpoint)> {
    open_endpoint_with(kind, model, None, super::rtl_ep::INBOUND_GBPS, None)
}

/// [`open_endpoint`] with our IPv6 address (`ip6`: the golden model's only address; the RTL's besides its IPv4
/// one), the RTL's inbound pacing and the directory of its MAC pcaps.
pub fn open_endpoint_with(
    kind: EndpointKind,
    mut model: testbench::model::DeviceConfig,
    ip6: Option<std::net::Ipv6Addr>,
    inbound_gbps: f64,
    pcap_dir: Option<std::path::PathBuf>,
) -> Result<(Dev, BoxedEndpoint)> {
    match kind {
        EndpointKind::Model => {
            // the golden model has one address: with an IPv6 one it speaks RoCEv2 over IPv6 only
            if let Some(a) = ip6 {
                model.ip = std::net::IpAddr::V6(a);
            }
            let d = SharedDevice::new(model);
            let ep = d.endpoint();
            Ok((Arc::new(d), Box::new(ep)))
        }
        EndpointKind::Rtl | EndpointKind::BoardSim => {
            let ip = match model.ip {
                std::net::IpAddr::V4(v4) => u32::from(v4),
                std::net::IpAddr::V6(_) => anyhow::bail!("the RTL endpoint speaks IPv4 only"),
            };
            let cfg = super::rtl_ep::RtlConfig { mac: model.mac.0, ipv4: ip, inbound_gbps, pcap_dir, board: kind == EndpointKind::BoardSim, ipv6: ip6, first_qpn: model.first_qpn, vlan: model.vlan.map(|t| t.tci) };
            let d = super::rtl_ep::RtlDevice::start_with(cfg)?;
            let ep = d.endpoint();
            Ok((d, Box::new(ep)))
        }
        EndpointKind::Card => anyhow::bail!("the card is opened by `rnic rxe --endpoint board --pci BDF` (sim::rxe::card_ep), not in the lab"),
        EndpointKind::Board => {
            // the card's code path over the simulated board: the board shell in the RTL thread, the driver here
            let ip = match model.ip {
                std::net::IpAddr::V4(v4) => u32::from(v4),
                std::net::IpAddr::V6(_) => anyhow::bail!("the RTL endpoint speaks IPv4 only"),
            };
            if model.vlan.is_some() {
                anyhow::bail!("a VLAN is set up by the RTL endpoint and the golden model, not yet by the card's code path");
            }
            let cfg = super::rtl_ep::RtlConfig { mac: model.mac.0, ipv4: ip, inbound_gbps, pcap_dir, board: true, ipv6: ip6, first_qpn: model.first_qpn, vlan: None };
            let d = super::rtl_ep::RtlDevice::start_with(cfg)?;
            let ep = d.endpoint();
            let card = super::card_ep::CardDevice::open(
                d.thread_bus()?,
                d.memory(),
                "the card's host code (driver, exchange over the host's network) over the simulated U250 board (board shell as a Verilator model; PCIe bridge and CMAC models)",
                Box::new(|b: &mut super::rtl_ep::ThreadBus, n| b.set_outstanding(n)),
            )?
            .with_backlog(d.inbound_backlog());
            Ok((Arc::new(card), Box::new(ep)))
        }
    }
}
