//! [`Device`]: the model RNIC. It owns host memory, protection domains, MRs, CQs and QPs, exposes the verbs,
//! and runs the receive path with rxe's header checks (`rxe_recv.c` `rxe_rcv` → `hdr_check` →
//! `check_type_state` → `check_addr` → `check_keys` → `rxe_icrc_check`). Every dropped frame is counted
//! under a named [`DropReason`]; no input panics.

use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr};

use crate::wire::headers::{DEFAULT_PKEY, GSI_QKEY};
use crate::wire::opcode::Transport;
use crate::wire::{parse_ethernet, Frame, IpHeader, MacAddr, RoceFrame, RocePacket, VlanTag, WireError};

use super::completer;
use super::memory::HostMemory;
use super::mr::{AccessFlags, MrKind, MrTable, Pd};
use super::qp::{rdma_udp_sport, roundup_pow2, Qp, QpState, QpType, RecvWqe, SendWqe, WqeState};
use super::requester;
use super::responder;
use super::timers::earliest;
use super::verbs::*;

/// Static device configuration.
#[derive(Clone, Copy, Debug)]
pub struct DeviceConfig {
    pub mac: MacAddr,
    /// The device's RoCEv2 address (IPv4 = the v4-mapped GID).
    pub ip: IpAddr,
    /// Seed of the key-tag generator.
    pub seed: u64,
    /// QPN of the first QP created (rxe's first user QP is 0x11).
    pub first_qpn: u32,
    /// Port active MTU, used by UD (rxe: largest IB MTU <= netdev MTU - 80).
    pub active_mtu: u32,
    /// The port's 802.1Q VLAN (rxe on a VLAN netdev `eth0.VID`): every frame sent carries this tag, and only
    /// frames tagged with its VID are taken. `None`: untagged, and priority-tagged (VID 0) frames taken too.
    pub vlan: Option<VlanTag>,
}

impl DeviceConfig {
    /// A device at `10.0.0.<last>` with MAC `02:00:00:00:00:<last>`.
    pub fn simple(last: u8) -> Self {
        DeviceConfig {
            mac: MacAddr([2, 0, 0, 0, 0, last]),
            ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, last)),
            seed: u64::from(last),
            first_qpn: 0x11,
            active_mtu: 4096,
            vlan: None,
        }
    }
}

/// Why a received frame was dropped without a NAK. The first group is rxe's `rxe_recv.c` checks in order; the
/// rest are the responder's and completer's silent drops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// Not RoCEv2 (ARP, other ethertype, other UDP port).
    NotRoce,
    /// Tagged for a VLAN other than the port's, or untagged while the port is on one (the kernel gives rxe
    /// only its netdev's frames).
    OtherVlan,
    /// Shorter than its headers say.
    Truncated,
    /// Does not parse (bad IP checksum, unknown opcode, bad lengths, fragment, ...).
    Malformed,
    /// Destination IP is not the device's GID (`rxe_chk_dgid`).
    NotLocalAddr,
    /// BTH TVer != 0 (`hdr_check`).
    BadTver,
    /// Destination QPN 0 (`hdr_check`: QP0 is not supported).
    Qp0,
    /// No QP with that number.
    UnknownQp,
    /// Opcode class does not match the QP type (`check_type_state`).
    WrongTransport,
    /// QP not in a state that takes this packet (`check_type_state`).
    BadState,
    /// RC/UC IP pair differs from the QP's address vector (`check_addr`).
    AddrMismatch,
    /// P_Key does not match 0xFFFF (`check_keys`).
    BadPkey,
    /// UD Q_Key differs from the QP's (`check_keys`).
    BadQkey,
    /// ICRC mismatch (`rxe_icrc_check`).
    BadIcrc,
    /// Out-of-sequence request after the one PSN-sequence NAK (`check_psn`, `sent_psn_nak`).
    OutOfSequence,
    /// Duplicate READ/atomic without a matching responder resource (`duplicate_request`).
    DuplicateNoResource,
    /// UC packet of a message being dropped, or a UC error (`check_psn` / `drop_msg`).
    UcDropped,
    /// UD/UC SEND without a receive WQE (`check_resource`).
    NoRecvWqe,
    /// UD/UC length error (`rxe_resp_check_length`, UD buffer too small).
    LengthError,
    /// A response or ACK with no WQE waiting for it (`rxe_completer` `get_wqe`).
    NoPendingWqe,
    /// A response/ACK older than the acknowledged point, or otherwise ignored (`check_psn` `COMPST_DONE`).
    StaleResponse,
}

/// What the receive path did with one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxOutcome {
    /// Processed (executed, answered, or used by the completer).
    Accepted,
    /// Answered with a NAK carrying this AETH syndrome (RNR NAKs included).
    Nak(u8),
    /// Dropped silently.
    Dropped(DropReason),
}

/// Device counters.
#[derive(Clone, Debug, Default)]
pub struct Counters {
    pub rx_frames: u64,
    pub tx_frames: u64,
    pub drops: BTreeMap<DropReason, u64>,
    /// Request packets transmitted (first transmissions and retransmissions).
    pub tx_request_packets: u64,
    /// Request packets transmitted by a go-back-N pass (PSN below the highest PSN sent before).
    pub tx_retransmitted_packets: u64,
    /// Go-back-N passes started (rxe `req_retry`).
    pub retries: u64,
    /// Retransmit timer expiries that caused a retry.
    pub timeouts: u64,
    /// Implied NAKs seen by the completer.
    pub implied_naks: u64,
    pub acks_sent: u64,
    pub acks_received: u64,
    /// NAKs sent, by AETH syndrome (0x60.., and RNR NAKs as 0x20|timer).
    pub naks_sent: BTreeMap<u8, u64>,
    pub naks_received: BTreeMap<u8, u64>,
    pub rnr_naks_sent: u64,
    pub rnr_naks_received: u64,
    /// Duplicate requests seen by the responder.
    pub duplicate_requests: u64,
    pub read_replays: u64,
    pub atomic_replays: u64,
    pub read_responses_sent: u64,
    pub atomic_acks_sent: u64,
}

impl Counters {
    pub fn drop_count(&self, r: DropReason) -> u64 {
        self.drops.get(&r).copied().unwrap_or(0)
    }
    pub fn total_drops(&self) -> u64 {
        self.drops.values().sum()
    }
    pub fn naks_sent_total(&self) -> u64 {
        self.naks_sent.values().sum()
    }

    /// What was counted after `before` was taken (a copy of these counters at an earlier time).
    pub fn since(&self, before: &Counters) -> Counters {
        fn map<K: Ord + Copy>(now: &BTreeMap<K, u64>, before: &BTreeMap<K, u64>) -> BTreeMap<K, u64> {
            now.iter()
                .map(|(k, v)| (*k, v - before.get(k).copied().unwrap_or(0)))
                .filter(|(_, v)| *v != 0)
                .collect()
        }
        Counters {
            rx_frames: self.rx_frames - before.rx_frames,
            tx_frames: self.tx_frames - before.tx_frames,
            drops: map(&self.drops, &before.drops),
            tx_request_packets: self.tx_request_packets - before.tx_request_packets,
            tx_retransmitted_packets: self.tx_retransmitted_packets - before.tx_retransmitted_packets,
            retries: self.retries - before.retries,
            timeouts: self.timeouts - before.timeouts,
            implied_naks: self.implied_naks - before.implied_naks,
            acks_sent: self.acks_sent - before.acks_sent,
            acks_received: self.acks_received - before.acks_received,
            naks_sent: map(&self.naks_sent, &before.naks_sent),
            naks_received: map(&self.naks_received, &before.naks_received),
            rnr_naks_sent: self.rnr_naks_sent - before.rnr_naks_sent,
            rnr_naks_received: self.rnr_naks_received - before.rnr_naks_received,
            duplicate_requests: self.duplicate_requests - before.duplicate_requests,
            read_replays: self.read_replays - before.read_replays,
            atomic_replays: self.atomic_replays - before.atomic_replays,
            read_responses_sent: self.read_responses_sent - before.read_responses_sent,
            atomic_acks_sent: self.atomic_acks_sent - before.atomic_acks_sent,
        }
    }
}

/// Everything of the device except the QP table, so that a QP can be borrowed mutably next to it.
#[derive(Debug)]
pub struct Ctx {
    pub config: DeviceConfig,
    pub mem: HostMemory,
    pub mrs: MrTable,
    pub pds: u32,
    pub cqs: Vec<VecDeque<WorkCompletion>>,
    pub counters: Counters,
    pub outbox: Vec<Vec<u8>>,
    pub now: u64,
    rng: u64,
    ip_id: u16,
}

impl Ctx {
    fn next_rand(&mut self) -> u64 {
        // SplitMix64.
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(crate) fn drop(&mut self, r: DropReason) -> RxOutcome {
        *self.counters.drops.entry(r).or_insert(0) += 1;
        RxOutcome::Dropped(r)
    }

    pub(crate) fn push_cqe(&mut self, cq: Cq, wc: WorkCompletion) {
        if let Some(q) = self.cqs.get_mut(cq.0 as usize) {
            q.push_back(wc);
        }
    }

    /// Build and queue a frame to `av` (rxe `rxe_prepare` / `prepare4` / `prepare6`: DF, TTL = hop limit,
    /// TOS = traffic class, UDP checksum 0; the IP ID is a running counter).
    pub(crate) fn emit(&mut self, av: &AddressVector, sport: u16, packet: RocePacket) {
        let smac = av.smac.unwrap_or(self.config.mac);
        let sip = av.sip.unwrap_or(self.config.ip);
        let mut f = match (sip, av.dip) {
            (IpAddr::V4(s), IpAddr::V4(d)) => RoceFrame::ipv4(smac, av.dmac, s, d, sport, packet),
            (s, d) => RoceFrame::ipv6(smac, av.dmac, to_v6(s), to_v6(d), sport, packet),
        };
        f.eth.vlan = self.config.vlan;
        match &mut f.ip {
            IpHeader::V4(h) => {
                h.ttl = av.hop_limit;
                h.tos = av.traffic_class;
                h.id = self.ip_id;
                self.ip_id = self.ip_id.wrapping_add(1);
            }
            IpHeader::V6(h) => {
                h.hop_limit = av.hop_limit;
                h.traffic_class = av.traffic_class;
            }
        }
        // A packet built by the model always validates; an error here would be a model bug, so it is counted
        // rather than panicking.
        match f.build() {
            Ok(bytes) => {
                self.counters.tx_frames += 1;
                self.outbox.push(bytes);
            }
            Err(_) => {
                *self.counters.drops.entry(DropReason::Malformed).or_insert(0) += 1;
            }
        }
    }

    /// Emit a packet on an RC/UC QP's connection.
    pub(crate) fn emit_qp(&mut self, qp: &Qp, packet: RocePacket) {
        if let Some(av) = qp.av {
            self.emit(&av, qp.sport, packet);
        }
    }
}

/// The fields of a received packet that [`rx_qp_check`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxQpFields {
    /// BTH destination QPN.
    pub dest_qpn: u32,
    /// BTH opcode byte.
    pub opcode: u8,
    /// BTH P_Key.
    pub pkey: u16,
    /// IP source address.
    pub src_ip: IpAddr,
    /// IP destination address.
    pub dst_ip: IpAddr,
    /// The DETH's Q_Key, `None` if the packet has no DETH.
    pub qkey: Option<u32>,
}

/// rxe's receive-path checks of a packet against its destination QP (`rxe_recv.c`, after `rxe_chk_dgid` and
/// the TVer check), in rxe's order; the first that fails is the drop reason:
///
/// * `hdr_check`: destination QPN 0 → [`DropReason::Qp0`]; an opcode without a table row →
///   [`DropReason::Malformed`]; no QP with that number (`qp` is `None`) → [`DropReason::UnknownQp`];
/// * `check_type_state`: the opcode's transport class must be the QP's type → [`DropReason::WrongTransport`];
///   requests need the QP in RTR/RTS/SQD/SQE ([`Qp::accepts_requests`]), responses in RTS/SQD
///   ([`Qp::accepts_responses`]) → [`DropReason::BadState`];
/// * `check_addr` (RC/UC only): the source IP must be the address vector's destination and the destination IP
///   its source (`local_ip`, the device's address, when the AV has none); no AV → [`DropReason::AddrMismatch`];
/// * `check_keys`: the P_Key must pkey-match 0xFFFF (low 15 bits 0x7FFF) → [`DropReason::BadPkey`]; UD: the
///   DETH Q_Key must be the QP's (GSI_QKEY for QP1) → [`DropReason::BadQkey`].
///
/// `qp` is the QP numbered `p.dest_qpn` (`None` if there is none). On success: the opcode's table row (its
/// [`crate::wire::OpcodeInfo::is_request`] sends the packet to the responder, else to the completer).
/// [`Device::receive`] decides with this; block-level RTL checks use it as their oracle.
pub fn rx_qp_check(
    p: &RxQpFields,
    qp: Option<&Qp>,
    local_ip: IpAddr,
) -> Result<&'static crate::wire::OpcodeInfo, DropReason> {
    // hdr_check
    if p.dest_qpn == 0 {
        return Err(DropReason::Qp0);
    }
    let Some(info) = crate::wire::opcode::info(p.opcode) else {
        return Err(DropReason::Malformed);
    };
    let Some(qp) = qp else {
        return Err(DropReason::UnknownQp);
    };
    // check_type_state: transport class must match the QP type.
    let type_ok = matches!(
        (qp.qp_type, info.transport),
        (QpType::Rc, Transport::Rc) | (QpType::Uc, Transport::Uc) | (QpType::Ud, Transport::Ud)
    );
    if !type_ok {
        return Err(DropReason::WrongTransport);
    }
    let request = info.is_request();
    if (request && !qp.accepts_requests()) || (!request && !qp.accepts_responses()) {
        return Err(DropReason::BadState);
    }
    // check_addr: RC/UC packets must come from exactly the QP's IP pair.
    if qp.qp_type != QpType::Ud {
        let Some(av) = qp.av else {
            return Err(DropReason::AddrMismatch);
        };
        let sip = av.sip.unwrap_or(local_ip);
        if !same_ip(p.src_ip, av.dip) || !same_ip(p.dst_ip, sip) {
            return Err(DropReason::AddrMismatch);
        }
    }
    // check_keys: P_Key must pkey-match the default 0xFFFF (0xFFFF or 0x7FFF pass); UD Q_Key.
    if p.pkey & 0x7FFF != DEFAULT_PKEY & 0x7FFF {
        return Err(DropReason::BadPkey);
    }
    if qp.qp_type == QpType::Ud {
        let want = if qp.qpn == 1 { GSI_QKEY } else { qp.qkey };
        if p.qkey != Some(want) {
            return Err(DropReason::BadQkey);
        }
    }
    Ok(info)
}

fn to_v6(a: IpAddr) -> std::net::Ipv6Addr {
    match a {
        IpAddr::V4(v) => v.to_ipv6_mapped(),
        IpAddr::V6(v) => v,
    }
}

fn same_ip(a: IpAddr, b: IpAddr) -> bool {
    to_v6(a) == to_v6(b)
}

/// Send-side completion (rxe `make_send_cqe`): rxe sets `WITH_IMM` on the sender's SEND_IMM/WRITE_IMM
/// completion too.
pub(crate) fn send_cqe(qp: &Qp, wqe: &SendWqe, status: WcStatus) -> WorkCompletion {
    let mut flags = 0;
    if wqe.wr.opcode.has_imm() {
        flags |= WcFlags::WITH_IMM;
    }
    WorkCompletion {
        wr_id: wqe.wr.wr_id,
        status,
        opcode: WcOpcode::from_wr(wqe.wr.opcode),
        // (a local operation has no data: a BIND_MW's SGE is the window's range)
        byte_len: if wqe.wr.opcode.is_local() { 0 } else { wqe.length as u32 },
        imm_data: if wqe.wr.opcode.has_imm() { wqe.wr.imm_data } else { 0 },
        invalidated_rkey: 0,
        qp_num: qp.qpn,
        src_qp: 0,
        wc_flags: WcFlags(flags),
    }
}

/// Move the QP to ERROR and flush: every send WQE not yet completed and every receive WQE completes with
/// `WR_FLUSH_ERR` (rxe `rxe_qp_error` → completer/responder flush).
pub(crate) fn qp_error(ctx: &mut Ctx, qp: &mut Qp) {
    qp.state = QpState::Error;
    qp.comp.retrans_deadline = None;
    qp.req.rnr_until = None;
    // (a LOCAL_INV done behind a WQE still pending is flushed too: rxe `flush_send_queue` takes every WQE)
    while let Some(wqe) = qp.sq.pop_front() {
        let wc = send_cqe(qp, &wqe, WcStatus::WrFlushErr);
        ctx.push_cqe(qp.send_cq, wc);
    }
    qp.req.idx = 0;
    while let Some(r) = qp.rq.pop_front() {
        ctx.push_cqe(qp.recv_cq, flush_recv_cqe(qp, &r));
    }
}

/// A receive's completion in error as rxe gives one: WR_FLUSH_ERR, byte_len 0, no flags.
pub(crate) fn flush_recv_cqe(qp: &Qp, r: &RecvWqe) -> WorkCompletion {
    WorkCompletion {
        wr_id: r.wr.wr_id,
        status: WcStatus::WrFlushErr,
        opcode: WcOpcode::Recv,
        byte_len: 0,
        imm_data: 0,
        invalidated_rkey: 0,
        qp_num: qp.qpn,
        src_qp: 0,
        wc_flags: WcFlags(0),
    }
}

/// The model RNIC.
#[derive(Debug)]
pub struct Device {
    pub(crate) ctx: Ctx,
    pub(crate) qps: BTreeMap<u32, Qp>,
    next_qpn: u32,
}

const VALID_MTUS: [u32; 5] = [256, 512, 1024, 2048, 4096];

impl Device {
    pub fn new(config: DeviceConfig) -> Self {
        Device {
            ctx: Ctx {
                config,
                mem: HostMemory::new(),
                mrs: MrTable::default(),
                pds: 0,
                cqs: Vec::new(),
                counters: Counters::default(),
                outbox: Vec::new(),
                now: 0,
                rng: config.seed ^ 0x5DEE_CE66_D1CE_5EED,
                ip_id: 0,
            },
            qps: BTreeMap::new(),
            next_qpn: config.first_qpn.max(2),
        }
    }

    pub fn config(&self) -> &DeviceConfig {
        &self.ctx.config
    }
    pub fn counters(&self) -> &Counters {
        &self.ctx.counters
    }
    pub fn mem(&self) -> &HostMemory {
        &self.ctx.mem
    }
    pub fn mem_mut(&mut self) -> &mut HostMemory {
        &mut self.ctx.mem
    }
    /// Allocate zeroed host memory; returns its VA.
    pub fn alloc(&mut self, len: usize) -> u64 {
        self.ctx.mem.alloc(len)
    }
    /// The address vector that reaches this device (its MAC and IP) from a peer.
    pub fn av_to_me(&self) -> AddressVector {
        AddressVector::new(self.ctx.config.mac, self.ctx.config.ip)
    }

    /// `ibv_alloc_pd`.
    pub fn alloc_pd(&mut self) -> Pd {
        self.ctx.pds += 1;
        Pd(self.ctx.pds)
    }

    /// `ibv_reg_mr`: register `[addr, addr+len)` of host memory.
    pub fn reg_mr(&mut self, pd: Pd, addr: u64, len: u64, access: AccessFlags) -> Result<super::mr::Mr, VerbsError> {
        self.reg_mr_kind(pd, addr, len, access, MrKind::User)
    }

    /// A fast-registration MR (rxe `alloc_mr` + `IB_WR_REG_MR` in one step): the only kind SEND_WITH_INV can
    /// invalidate (rxe `rxe_invalidate_mr`).
    pub fn reg_mr_fast(
        &mut self,
        pd: Pd,
        addr: u64,
        len: u64,
        access: AccessFlags,
    ) -> Result<super::mr::Mr, VerbsError> {
        self.reg_mr_kind(pd, addr, len, access, MrKind::FastReg)
    }

    fn reg_mr_kind(
        &mut self,
        pd: Pd,
        addr: u64,
        len: u64,
        access: AccessFlags,
        kind: MrKind,
    ) -> Result<super::mr::Mr, VerbsError> {
        if pd.0 == 0 || pd.0 > self.ctx.pds {
            return Err(VerbsError::NoSuchPd);
        }
        if len > 0 && !self.ctx.mem.contains(addr, len) {
            return Err(VerbsError::BadAddress { addr, len });
        }
        // IBA: remote write/atomic need local write.
        if (access.contains(AccessFlags::REMOTE_WRITE) || access.contains(AccessFlags::REMOTE_ATOMIC))
            && !access.contains(AccessFlags::LOCAL_WRITE)
        {
            return Err(VerbsError::InvalidArgument("REMOTE_WRITE/ATOMIC need LOCAL_WRITE"));
        }
        let tag = self.ctx.next_rand() as u8;
        Ok(self.ctx.mrs.insert(pd, addr, len, access, kind, tag))
    }

    /// `ibv_dereg_mr`. An MR with windows bound to it is refused (rxe `rxe_dereg_mr`: `num_mw`).
    pub fn dereg_mr(&mut self, lkey: u32) -> Result<(), VerbsError> {
        if self.ctx.mrs.get(lkey).map_or(false, |e| e.kind == MrKind::Window) {
            return Err(VerbsError::NoSuchMr(lkey));
        }
        if self.ctx.mrs.has_windows(lkey) {
            return Err(VerbsError::InvalidArgument("the MR has memory windows bound to it"));
        }
        self.ctx.mrs.remove(lkey).map(|_| ())
    }

    /// `ibv_alloc_mw` of type 1: a window of PD `pd`, unbound; its rkey.
    pub fn alloc_mw(&mut self, pd: Pd) -> Result<u32, VerbsError> {
        if pd.0 == 0 || pd.0 > self.ctx.pds {
            return Err(VerbsError::NoSuchPd);
        }
        let tag = self.ctx.next_rand() as u8;
        Ok(self.ctx.mrs.insert(pd, 0, 0, AccessFlags::NONE, MrKind::Window, tag).rkey)
    }

    /// `ibv_alloc_mw` of type 2: a window of PD `pd`, free (not valid) until a BIND_MW WQE binds it; its rkey.
    pub fn alloc_mw2(&mut self, pd: Pd) -> Result<u32, VerbsError> {
        if pd.0 == 0 || pd.0 > self.ctx.pds {
            return Err(VerbsError::NoSuchPd);
        }
        let tag = self.ctx.next_rand() as u8;
        Ok(self.ctx.mrs.insert(pd, 0, 0, AccessFlags::NONE, MrKind::Window2, tag).rkey)
    }

    /// `ibv_bind_mw` of the type 1 window `mw` on QP `qpn`: `len` bytes at `addr` of MR `mr` with the remote
    /// rights of `access`; `len` 0 unbinds. The rules (rxe `rxe_check_bind_mw`, IBA C10-72..75): the QP, the
    /// window and the MR in one PD, the MR registered with MW_BIND, REMOTE_WRITE/ATOMIC only over an MR with
    /// LOCAL_WRITE, the window inside the MR. Returns the window's new rkey (its tag + 1, `ibv_inc_rkey`).
    pub fn bind_mw(&mut self, qpn: u32, mw: u32, mr: u32, addr: u64, len: u64, access: AccessFlags) -> Result<u32, VerbsError> {
        let qp_pd = self.qps.get(&qpn).ok_or(VerbsError::NoSuchQp(qpn))?.pd;
        let w = self.ctx.mrs.get(mw).filter(|e| e.kind == MrKind::Window).ok_or(VerbsError::NoSuchMr(mw))?.mr;
        if w.pd != qp_pd {
            return Err(VerbsError::InvalidArgument("the QP and the window are in different PDs"));
        }
        let new_key = rnic_driver::verbs::inc_rkey(mw);
        let (bound, valid, range) = if len == 0 {
            (None, false, (0, 0, AccessFlags::NONE))
        } else {
            let m = self.ctx.mrs.get(mr).filter(|e| e.kind != MrKind::Window).ok_or(VerbsError::NoSuchMr(mr))?.mr;
            if m.pd != w.pd {
                return Err(VerbsError::InvalidArgument("the MR and the window are in different PDs"));
            }
            if !m.access.contains(AccessFlags::MW_BIND) {
                return Err(VerbsError::InvalidArgument("the MR was registered without MW_BIND"));
            }
            if (access.contains(AccessFlags::REMOTE_WRITE) || access.contains(AccessFlags::REMOTE_ATOMIC))
                && !m.access.contains(AccessFlags::LOCAL_WRITE)
            {
                return Err(VerbsError::InvalidArgument("REMOTE_WRITE/ATOMIC through a window need the MR's LOCAL_WRITE"));
            }
            if addr < m.addr || addr.checked_add(len).map_or(true, |e| e > m.addr + m.length) {
                return Err(VerbsError::InvalidArgument("the window does not lie inside the MR"));
            }
            let remote = AccessFlags(access.0 & AccessFlags::REMOTE.0);
            (Some(mr), true, (addr, len, remote))
        };
        let e = self.ctx.mrs.get_mut(mw).expect("looked up above");
        (e.mr.addr, e.mr.length, e.mr.access) = range;
        (e.mr.lkey, e.mr.rkey, e.valid, e.bound_to) = (new_key, new_key, valid, bound);
        Ok(new_key)
    }

    /// `ibv_dealloc_mw`.
    pub fn dealloc_mw(&mut self, mw: u32) -> Result<(), VerbsError> {
        // (by index: a type 2 window's key changes with each bind)
        match self.ctx.mrs.at_index_mut(mw) {
            Some(e) if matches!(e.kind, MrKind::Window | MrKind::Window2) => {
                let k = e.mr.lkey;
                self.ctx.mrs.remove(k).map(|_| ())
            }
            _ => Err(VerbsError::NoSuchMr(mw)),
        }
    }

    /// True while the MR with this key exists and has not been invalidated.
    pub fn mr_valid(&self, key: u32) -> bool {
        self.ctx.mrs.get(key).map_or(false, |e| e.valid)
    }

    /// `ibv_create_cq`.
    pub fn create_cq(&mut self, _cqe: u32) -> Cq {
        self.ctx.cqs.push(VecDeque::new());
        Cq(self.ctx.cqs.len() as u32 - 1)
    }

    /// `ibv_poll_cq`: up to `max` completions, oldest first.
    pub fn poll_cq(&mut self, cq: Cq, max: usize) -> Vec<WorkCompletion> {
        match self.ctx.cqs.get_mut(cq.0 as usize) {
            Some(q) => {
                let n = max.min(q.len());
                q.drain(..n).collect()
            }
            None => Vec::new(),
        }
    }

    /// `ibv_create_qp`; returns the QPN (rxe numbers user QPs from 0x11 up).
    pub fn create_qp(&mut self, pd: Pd, init: QpInitAttr) -> Result<u32, VerbsError> {
        if pd.0 == 0 || pd.0 > self.ctx.pds {
            return Err(VerbsError::NoSuchPd);
        }
        for cq in [init.send_cq, init.recv_cq] {
            if cq.0 as usize >= self.ctx.cqs.len() {
                return Err(VerbsError::NoSuchCq);
            }
        }
        let qpn = self.next_qpn;
        self.next_qpn += 1;
        let qp = Qp::new(qpn, init.qp_type, pd, init.send_cq, init.recv_cq, init.cap, init.sq_sig_all);
        self.qps.insert(qpn, qp);
        Ok(qpn)
    }

    /// `ibv_destroy_qp`.
    pub fn destroy_qp(&mut self, qpn: u32) -> Result<(), VerbsError> {
        self.qps.remove(&qpn).map(|_| ()).ok_or(VerbsError::NoSuchQp(qpn))
    }

    /// The QP's current state.
    pub fn qp_state(&self, qpn: u32) -> Option<QpState> {
        self.qps.get(&qpn).map(|q| q.state)
    }

    /// Read access to a QP context (for tests and the scoreboard).
    pub fn qp(&self, qpn: u32) -> Option<&Qp> {
        self.qps.get(&qpn)
    }

    /// `ibv_modify_qp` (rxe `rxe_modify_qp` / `rxe_qp_from_attr`). Every `Some` attribute is applied.
    pub fn modify_qp(&mut self, qpn: u32, attr: &QpAttr) -> Result<(), VerbsError> {
        let mut qp = self.qps.remove(&qpn).ok_or(VerbsError::NoSuchQp(qpn))?;
        let r = self.modify_qp_inner(&mut qp, attr);
        self.qps.insert(qpn, qp);
        r
    }

    fn modify_qp_inner(&mut self, qp: &mut Qp, attr: &QpAttr) -> Result<(), VerbsError> {
        use QpState::*;
        let from = qp.state;
        let to = attr.qp_state.unwrap_or(from);
        let ok = matches!(
            (from, to),
            (Reset, Reset | Init | Error)
                | (Init, Init | Rtr | Reset | Error)
                | (Rtr, Rts | Reset | Error)
                | (Rts, Rts | Sqd | Reset | Error)
                | (Sqd, Sqd | Rts | Reset | Error)
                | (Sqe, Rts | Reset | Error)
                | (Error, Reset | Error)
        );
        if !ok {
            return Err(VerbsError::BadTransition { from, to });
        }
        if let Some(m) = attr.path_mtu {
            if !VALID_MTUS.contains(&m) {
                return Err(VerbsError::InvalidArgument("path_mtu must be 256..4096, a power of two"));
            }
        }
        for (v, name) in [(attr.retry_cnt, "retry_cnt"), (attr.rnr_retry, "rnr_retry")] {
            if v.map_or(false, |v| v > 7) {
                return Err(VerbsError::InvalidArgument(name));
            }
        }
        if attr.min_rnr_timer.map_or(false, |v| v > 31) || attr.timeout.map_or(false, |v| v > 31) {
            return Err(VerbsError::InvalidArgument("timer code out of range"));
        }
        let connected = qp.qp_type != QpType::Ud;
        if from == Init && to == Rtr && connected {
            if attr.av.is_none() && qp.av.is_none() {
                return Err(VerbsError::MissingAttr("av"));
            }
            if attr.dest_qp_num.is_none() {
                return Err(VerbsError::MissingAttr("dest_qp_num"));
            }
            if attr.rq_psn.is_none() {
                return Err(VerbsError::MissingAttr("rq_psn"));
            }
        }
        if from == Rtr && to == Rts && attr.sq_psn.is_none() {
            return Err(VerbsError::MissingAttr("sq_psn"));
        }
        if let Some(m) = attr.path_mtu {
            qp.path_mtu = m;
        }
        if let Some(d) = attr.dest_qp_num {
            qp.dest_qpn = d & 0xFF_FFFF;
        }
        if let Some(p) = attr.rq_psn {
            qp.resp.psn = p & 0xFF_FFFF;
            qp.resp.ack_psn = qp.resp.psn;
        }
        if let Some(p) = attr.sq_psn {
            qp.req.psn = p & 0xFF_FFFF;
            qp.comp.psn = qp.req.psn;
        }
        if let Some(v) = attr.max_rd_atomic {
            qp.max_rd_atomic = v;
        }
        if let Some(v) = attr.max_dest_rd_atomic {
            qp.max_dest_rd_atomic = v;
            // rxe `rxe_qp_from_attr`: the responder-resource ring is max_dest_rd_atomic rounded up to 2^n.
            qp.resp.resources = vec![None; roundup_pow2(v)];
            qp.resp.res_head = 0;
        }
        if let Some(v) = attr.min_rnr_timer {
            qp.min_rnr_timer = v;
        }
        if let Some(v) = attr.timeout {
            qp.timeout = v;
        }
        if let Some(v) = attr.retry_cnt {
            qp.retry_cnt = v;
            qp.comp.retry_cnt = v;
        }
        if let Some(v) = attr.rnr_retry {
            qp.rnr_retry = v;
            qp.comp.rnr_retry = v;
        }
        if let Some(v) = attr.qkey {
            qp.qkey = v;
        }
        if let Some(v) = attr.qp_access_flags {
            qp.access = v;
        }
        if let Some(av) = attr.av {
            qp.av = Some(av);
        }
        if connected && (attr.av.is_some() || attr.dest_qp_num.is_some()) {
            if let Some(av) = qp.av {
                qp.sport = av.sport.unwrap_or_else(|| rdma_udp_sport(qp.qpn, qp.dest_qpn));
            }
        }
        match to {
            Reset if from != Reset => {
                let fresh = Qp::new(qp.qpn, qp.qp_type, qp.pd, qp.send_cq, qp.recv_cq, qp.cap, qp.sq_sig_all);
                *qp = fresh;
            }
            Error if from != Error => qp_error(&mut self.ctx, qp),
            _ => qp.state = to,
        }
        Ok(())
    }

    /// `ibv_post_send` (rxe `rxe_post_send` → `validate_send_wr` / `init_send_wr`). In ERROR the WR completes
    /// at once with `WR_FLUSH_ERR`.
    pub fn post_send(&mut self, qpn: u32, wr: SendWr) -> Result<(), VerbsError> {
        let qp = self.qps.get_mut(&qpn).ok_or(VerbsError::NoSuchQp(qpn))?;
        let length = wr.total_len();
        match qp.state {
            QpState::Rts | QpState::Sqd => {}
            QpState::Error => {
                let wqe = new_wqe(wr, length);
                let wc = send_cqe(qp, &wqe, WcStatus::WrFlushErr);
                let cq = qp.send_cq;
                self.ctx.push_cqe(cq, wc);
                return Ok(());
            }
            _ => return Err(VerbsError::NotSupported("post_send before RTS")),
        }
        if wr.sg_list.len() > qp.cap.max_send_sge as usize {
            return Err(VerbsError::InvalidArgument("too many SGEs"));
        }
        if length > 1 << 31 {
            return Err(VerbsError::InvalidArgument("message longer than 2^31"));
        }
        if qp.sq.len() >= qp.cap.max_send_wr as usize {
            return Err(VerbsError::QueueFull);
        }
        let op = wr.opcode;
        match qp.qp_type {
            QpType::Rc => {}
            QpType::Uc => {
                if op.is_read_or_atomic() {
                    return Err(VerbsError::NotSupported("UC has no READ or atomics"));
                }
            }
            QpType::Ud => {
                if !matches!(op, WrOpcode::Send | WrOpcode::SendWithImm) {
                    return Err(VerbsError::NotSupported("UD has SEND only"));
                }
                if wr.ud.is_none() {
                    return Err(VerbsError::InvalidArgument("UD WR needs a destination"));
                }
            }
        }
        if op.is_atomic() {
            if length != 8 || wr.flags.inline {
                return Err(VerbsError::InvalidArgument("atomic length must be 8"));
            }
            if wr.remote_addr & 7 != 0 {
                return Err(VerbsError::InvalidArgument("atomic remote address must be 8-byte aligned"));
            }
        }
        if wr.flags.inline {
            if op.is_read_or_atomic() {
                return Err(VerbsError::InvalidArgument("inline READ/atomic"));
            }
            if length > u64::from(qp.cap.max_inline_data) {
                return Err(VerbsError::InvalidArgument("inline data longer than max_inline_data"));
            }
        }
        qp.sq.push_back(new_wqe(wr, length));
        Ok(())
    }

    /// `ibv_post_recv`. In ERROR the WR completes at once with `WR_FLUSH_ERR`.
    pub fn post_recv(&mut self, qpn: u32, wr: RecvWr) -> Result<(), VerbsError> {
        let qp = self.qps.get_mut(&qpn).ok_or(VerbsError::NoSuchQp(qpn))?;
        if qp.state == QpState::Reset {
            return Err(VerbsError::NotSupported("post_recv in RESET"));
        }
        if wr.sg_list.len() > qp.cap.max_recv_sge as usize {
            return Err(VerbsError::InvalidArgument("too many SGEs"));
        }
        let r = RecvWqe { wr };
        if qp.state == QpState::Error {
            let wc = flush_recv_cqe(qp, &r);
            let cq = qp.recv_cq;
            self.ctx.push_cqe(cq, wc);
            return Ok(());
        }
        if qp.rq.len() >= qp.cap.max_recv_wr as usize {
            return Err(VerbsError::QueueFull);
        }
        qp.rq.push_back(r);
        Ok(())
    }

    /// Receive one Ethernet frame (no FCS) at time `now_ns`. Answers go to the outbox (see [`Device::poll`]).
    pub fn receive(&mut self, now_ns: u64, frame: &[u8]) -> RxOutcome {
        self.ctx.now = self.ctx.now.max(now_ns);
        self.ctx.counters.rx_frames += 1;
        let f = match parse_ethernet(frame) {
            Ok(Frame::Roce(f)) => f,
            Ok(_) => return self.ctx.drop(DropReason::NotRoce),
            Err(e) if e.is_truncated() => return self.ctx.drop(DropReason::Truncated),
            Err(WireError::NotRoce(_)) => return self.ctx.drop(DropReason::NotRoce),
            Err(_) => return self.ctx.drop(DropReason::Malformed),
        };
        // the kernel hands rxe only the frames of its netdev's VLAN (untagged or VID 0 for the real device)
        let vid = |v: Option<VlanTag>| v.map_or(0, |t| t.vid());
        if vid(f.eth.vlan) != vid(self.ctx.config.vlan) || (f.eth.vlan.is_none() && self.ctx.config.vlan.is_some()) {
            return self.ctx.drop(DropReason::OtherVlan);
        }
        // rxe_chk_dgid: the destination must be one of our GIDs.
        if !same_ip(f.ip.dst(), self.ctx.config.ip) {
            return self.ctx.drop(DropReason::NotLocalAddr);
        }
        let bth = f.packet.bth;
        // hdr_check
        if bth.tver != 0 {
            return self.ctx.drop(DropReason::BadTver);
        }
        // hdr_check (QPN 0, opcode), the QP lookup, check_type_state, check_addr, check_keys
        let fields = RxQpFields {
            dest_qpn: bth.dest_qpn,
            opcode: bth.opcode,
            pkey: bth.pkey,
            src_ip: f.ip.src(),
            dst_ip: f.ip.dst(),
            qkey: f.packet.deth().map(|d| d.qkey),
        };
        let info = match rx_qp_check(&fields, self.qps.get(&bth.dest_qpn), self.ctx.config.ip) {
            Ok(info) => info,
            Err(r) => return self.ctx.drop(r),
        };
        let Some(mut qp) = self.qps.remove(&bth.dest_qpn) else {
            return self.ctx.drop(DropReason::UnknownQp);
        };
        let out = self.rx_checked(&mut qp, &f, info);
        self.qps.insert(qp.qpn, qp);
        out
    }

    /// After [`rx_qp_check`] passed: the ICRC check, then the responder or the completer.
    fn rx_checked(&mut self, qp: &mut Qp, f: &RoceFrame, info: &crate::wire::OpcodeInfo) -> RxOutcome {
        let ctx = &mut self.ctx;
        let request = info.is_request();
        // rxe_icrc_check: after the header checks.
        if f.icrc_override.is_some() {
            return ctx.drop(DropReason::BadIcrc);
        }
        let out = if request {
            responder::rxe_responder(ctx, qp, f)
        } else {
            completer::rxe_completer(ctx, qp, f)
        };
        if qp.state == QpState::Error && (!qp.sq.is_empty() || !qp.rq.is_empty()) {
            qp_error(ctx, qp);
        }
        out
    }

    /// Advance time to `now_ns`: fire due timers (retransmit, RNR wait), run every requester, and return the
    /// frames to transmit (responses queued by [`Device::receive`] first).
    pub fn poll(&mut self, now_ns: u64) -> Vec<Vec<u8>> {
        self.ctx.now = self.ctx.now.max(now_ns);
        let qpns: Vec<u32> = self.qps.keys().copied().collect();
        for qpn in qpns {
            let mut qp = self.qps.remove(&qpn).expect("listed");
            completer::fire_timers(&mut self.ctx, &mut qp);
            requester::rxe_requester(&mut self.ctx, &mut qp);
            self.qps.insert(qpn, qp);
        }
        std::mem::take(&mut self.ctx.outbox)
    }

    /// Receive a frame, then [`Device::poll`].
    pub fn process(&mut self, now_ns: u64, frame: &[u8]) -> Vec<Vec<u8>> {
        self.receive(now_ns, frame);
        self.poll(now_ns)
    }

    /// The earliest pending timer of any QP.
    pub fn next_deadline(&self) -> Option<u64> {
        self.qps
            .values()
            .fold(None, |acc, q| earliest(acc, earliest(q.comp.retrans_deadline, q.req.rnr_until)))
    }

    /// True when some QP has send work it could transmit now (used by drivers to detect idleness).
    pub fn has_work(&self) -> bool {
        !self.ctx.outbox.is_empty()
            || self.qps.values().any(|q| {
                q.state == QpState::Rts
                    && q.req.rnr_until.is_none()
                    && (q.req.need_retry || q.sq.iter().skip(q.req.idx).any(|w| w.state != WqeState::Done))
            })
    }
}

fn new_wqe(wr: SendWr, length: u64) -> SendWqe {
    SendWqe {
        wr,
        length,
        state: WqeState::Posted,
        first_psn: 0,
        orig_first_psn: 0,
        last_psn: 0,
        offset: 0,
        read_received: 0,
        status: WcStatus::Success,
    }
}
