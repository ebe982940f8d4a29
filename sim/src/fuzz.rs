//! Fuzz of the RNIC's RX port: a seeded stream of random, malformed and mutated frames into the
//! Verilator model of the whole RNIC ([`crate::system::rig`], the golden peer detached), with three checks:
//! no hang, no write outside a registered MR, and the drop accounting.
//!
//! **Frames** ([`Kind`]): well-formed RC requests to our QPs (mostly in sequence, with RETHs into and out of
//! the MRs), wild requests (random opcode, PSN, RETH, length, pad), responses (ACK, READ RESPONSE, ATOMIC
//! ACKNOWLEDGE), frames to QPNs that do not exist, frames with one header field wrong, the same frames mutated
//! (bit flips, byte overwrites, truncation, extension, header bytes) with the ICRC recomputed where RX Parse
//! checks it or left as it was, ARP frames, and raw random bytes (14..9000). Every frame is built from the
//! golden wire model (`testbench::wire`) and the seed alone.
//!
//! **QPs.** Four RC QPs, two UC QPs and two UD QPs of ours in RTS, connected to QPs of the peer (the UD ones
//! with the Q_Key `UD_QKEY`): four *rough* ones (two RC, one UC, one UD) take every kind of frame; four *clean*
//! ones take only well-formed requests aimed inside the MR and receive WQEs with room for any message, so that
//! they stay out of the error state and their data path (WQE fetch, scatter, READ responses, receive
//! completions) is exercised. A UC QP's well-formed SENDs and WRITEs carry the UC opcodes (its READs and
//! atomics keep RC's, which its lookup drops), as do most of its wild requests; what the UC rules drop is
//! counted in `resp_drop_uc`, one of the ends of a request. A UD QP's well-formed requests are UD SENDs (with
//! or without immediate) at any PSN, mostly with its Q_Key (a wrong one is a lookup drop), up to its MTU or
//! (rough) 4096 bytes; its wild ones UD SENDs with random AckReq, pad, length and Q_Key, or RC opcodes its
//! lookup drops. A UD datagram without a receive is counted in `resp_drop_uc` too, and every UD receive
//! completion must hold the 40-byte GRH area. The peer is detached: what the RNIC sends is only collected.
//!
//! **The run** is cut into chunks. Before a chunk every QP of ours is brought back (RESET, INIT, RTR, RTS with a
//! fresh ePSN, send PSN, path MTU and, on the rough QPs, access: a class-C error leaves a QP dropping everything
//! until then) and its receive queue is topped up to 16 WQEs (on the rough QPs some run past the MR's end, lie
//! in a read-only MR, carry a foreign lkey or point at unregistered memory). A chunk's frames go in back to back
//! at the link rate (they queue at the MAC) or, in [`PACED`] of the chunks, each once the RNIC has been quiet
//! for a few cycles (the generator learns the responder's ePSN from its ACKs and NAKs as it goes). Then the
//! system runs until no port has moved for [`QUIET`] cycles, the CQ is drained and the counters are read.
//!
//! **Flow control, so that every chunk is checked exactly.** RX Parse never back-pressures the MAC: a frame
//! that finds no room is dropped whole at its first beat as an overflow, and which frames those are depends
//! on timing, not on the frames, so a chunk with overflow drops can only bound the other counters. The fuzzer
//! therefore plays a lossless link (as PFC gives RoCE): a frame goes onto the link only when RX Parse is sure
//! to take it, by RX Parse's room rule (`rtl/src/wire/rx_parse.rs`: a frame is taken while the payload FIFO
//! holds fewer than [`RX_FIFO_ROOM`] beats and the pending queue fewer than [`RX_PEND_ROOM`] frames). A frame
//! writes at most one FIFO beat per frame beat, [`RX_FRAME_BEATS`] at most ([`rx_fifo_beats`]); RX Parse
//! counts frames in order, when their verdict leaves the pending queue, and by then the beats of all but the
//! reader's two jobs ([`RX_JOB_BEATS`]) are gone. So with `open` the frames sent and not yet counted (the
//! sum of RX Parse's counters, read over the register bus while frames wait), the FIFO holds at most
//! `beats(open) + RX_JOB_BEATS` and the queue at most `|open|`; a frame waits while either could be too
//! many. Likewise an ARP request for us waits while [`ARP_FIFO`] earlier ones have no reply out yet (the ARP
//! responder drops a request that finds its reply FIFO full and counts it in `arp_dropped`, checked to stay
//! 0). Frames still follow each other back to back whenever the RNIC keeps up, and the RNIC still backs RX
//! Parse up to that bound (the report counts the frames held back, and those held with the link idle). No
//! frame of the fuzz may then be an overflow drop, and every counter is compared exactly in every chunk.
//!
//! **The overflow probe** keeps RX Parse's overflow path under the fuzz without giving up exactness: in the
//! link-rate chunks whose index is 1 mod [`PROBE_EVERY`], the chunk's first frames are an RDMA READ of
//! [`PROBE_READ`] bytes on a clean QP, [`PROBE_WAITING`] small READs behind it (they wait, in the top's hold
//! register and at the head of RX Parse's pending queue, while the Responder hands the big READ's responses
//! to TX at the wire's pace), then [`PROBE_FLOOD`] frames of [`Kind::Flood`] sent past flow control: three
//! times the payload-FIFO beats RX Parse has room for, all of one verdict (not for us). Which of them find no
//! room depends on timing, but only they may (the fuzzer then waits until RX Parse has counted every frame
//! before it sends the next), so `rx_drop_overflow` is at most the flood and `rx_drop_not_for_us +
//! rx_drop_overflow` equals the reference's not-for-us count exactly; every other counter is unchanged by the
//! split and compared exactly as in any chunk.
//!
//! **Checks**, per chunk and at the end (the first failure stops the run; every problem names the seed,
//! the chunk and the frame indices, which are also the record numbers of `rnic-rx.pcap`):
//! * *no hang*: every frame is accounted for by RX Parse's counters within [`HANG_CAP`] cycles of the last
//!   one (or of a frame's wait for room), and after the run a golden-peer RDMA WRITE and READ on a reset QP
//!   complete correctly;
//! * *no write outside a registered MR*: every byte of host memory outside the read-write MRs and the CQ ring
//!   (the rings the RNIC only reads, a read-only MR and unregistered memory around the MR included) equals a
//!   shadow copy kept from the start and updated only with the driver's own receive WQEs; the DMA host saw no
//!   fault;
//! * *drop accounting*, exact in every chunk: [`predict_rx`] computes RX Parse's verdict from its documented
//!   rules and [`responder_fate`] where a good frame goes; see [`check_chunk`] for the identities.
//!
//! **An RTL gap this fuzz found, since fixed** (commit 4cf028e; `a_frame_cut_short_with_a_right_icrc_is_a_length_error_and_rx_goes_on`
//! in `sim/tests/rnic_fuzz.rs` keeps it fixed): RX Parse did not check that a frame holds 14 + IP total
//! length bytes. A truncated frame whose ICRC was right over the bytes that did come passed, with a payload
//! length taken from its UDP length; when that asked for more payload-FIFO beats than the frame wrote, the
//! reader took them from the frames behind it, then its 7-bit discard count (written beats - payload beats)
//! wrapped and it waited for beats that the 24 frames its pending queue then held never brought: RX Parse
//! stopped for good (every later frame an overflow drop), the Responder waited for payload forever and so
//! did every table command it must take (`modify_qp` timed out). RX Parse now drops such a frame as a length
//! error, the rule [`predict_rx`] applies ([`RxVerdict::reason`]); [`RxVerdict::before_fix`] is the verdict
//! without it, and the run tallies the frames the rule decides (the report's "before its cut-frame fix"
//! figures) and names them as suspects when a chunk fails. [`FuzzOpts::skip_truncated`] still leaves those
//! frames out, only to tell a regression of that rule from anything else.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::system::{rig, Rig, OUR_IP, OUR_MAC, UD_QKEY};
use testbench::crc::{crc32_update, icrc_seed_state};
use rnic_driver::CsrBus;
use rnic_driver::host::{RecvWqe, REG_COUNTERS, WQE_BYTES};
use testbench::model::*;
use testbench::wire::frame::{
    icmp_echo_reply, icmp_echo_request, icrc, icrc_header_mask, internet_checksum, ArpFrame, MacAddr, ETHERTYPE_ARP,
    ETHERTYPE_IPV4, IP_PROTO_ICMP,
};
use testbench::wire::headers::{AethKind, NakCode, AETH_ACK_UNLIMITED};
use testbench::wire::opcode::{self, *};
use testbench::wire::{parse_ethernet, port_vlan_view, Bth, ExtHeader, Frame, Reth, RoceFrame, RocePacket};

/// Cycles without any movement at a port after which the RNIC counts as quiet.
pub const QUIET: u64 = 1_000;
/// Cycles after the last frame of a chunk within which the RNIC must go quiet, and that a frame may wait for
/// room (flow control) before the RNIC counts as hung.
pub const HANG_CAP: u64 = 10_000_000;
/// Receive WQEs kept posted per QP (the rig's RQ ring size).
const RQ_DEPTH: usize = 16;
/// The fuzz MR (read-write, every access) and the unregistered host memory around it.
const MR_LEN: u64 = 2 << 20;
const CANARY: u64 = 1 << 20;
/// A read-only MR (REMOTE_READ only, no LOCAL_WRITE) inside the lower canary: nothing may ever write it.
const RO_OFF: u64 = 512 << 10;
const RO_LEN: u64 = 64 << 10;
/// Extra QPs besides the rig's.
const EXTRA_QPS: usize = 3;
/// UC QPs of ours after them (one rough, one clean).
const UC_QPS: usize = 2;
/// UD QPs of ours after those (one rough, one clean), with the Q_Key [`UD_QKEY`].
const UD_QPS: usize = 2;
/// Entries of the extra QPs' CQ: room for every receive they may have posted at once.
const BIG_CQ: u32 = 256;
/// Chunks whose frames go in paced rather than at the link rate. A paced frame costs some 190 cycles (the
/// link's 100-cycle latency, the RNIC's answer, the quiet gap), one at the link rate some 28, and the cycles
/// are the run's time: with a quarter paced, flow control and the overflow probe, the CI run (seed 0x0F22)
/// takes 6.6 M cycles, against 7.4 M with 30 % paced and overflow drops at the link rate. Both kinds of
/// chunk are checked exactly.
const PACED: f64 = 0.25;
/// RX Parse's ICRC residue (rtl::wire::rx_parse::CRC32_RESIDUE).
const RESIDUE: u32 = rtl::wire::rx_parse::CRC32_RESIDUE;
/// The largest payload RX Parse takes (the largest path MTU).
const MAX_PAYLOAD: u32 = 4096;
/// RX Parse's counters, first in the counter window: good frames, drops by reason 1..=7, overflow (8).
const RX_COUNTERS: usize = rtl::wire::rx_parse::RX_COUNTERS;
/// RX Parse's room rule (`rtl/src/wire/rx_parse.rs`, `k_min_space` and `k_max_pend`): a frame is taken at its
/// first beat while its payload FIFO (512 beats) holds fewer than 512 - 66 - 1 beats and its pending queue
/// (512 entries) fewer than 512 - 8 frames; else it is an overflow drop.
pub const RX_FIFO_ROOM: u64 = 512 - 66 - 1;
pub const RX_PEND_ROOM: usize = 512 - 8;
/// Payload FIFO beats one frame may write (`k_max_beats`).
pub const RX_FRAME_BEATS: u64 = 66;
/// FIFO beats of frames RX Parse has counted that may still be in its payload FIFO: the reader's job and the
/// one waiting for it (a verdict leaves the pending queue, and is counted, only when no job waits).
pub const RX_JOB_BEATS: u64 = 2 * RX_FRAME_BEATS;
/// ARP replies waiting in the ARP responder's FIFO (`rtl/src/wire/arp.rs`: 4 entries; a request for us that
/// finds it full is dropped).
pub const ARP_FIFO: usize = 4;
/// Cycles a frame held back by flow control waits between two looks at RX Parse's counters.
const CREDIT_POLL: u64 = 32;
/// The overflow probe (see the module documentation) runs in link-rate chunks whose index is 1 mod this.
const PROBE_EVERY: u64 = 4;
/// The probe's RDMA READ (its responses take some 7,000 cycles of the 100G link; the Responder, one packet at
/// a time, hands them to TX at that pace once TX's 32-header queue is full) and the frames sent past flow
/// control behind it (some 2,100 bytes, 33 payload-FIFO beats, each: three times the room RX Parse keeps, in
/// some 2,200 cycles of the link).
const PROBE_READ: u32 = 256 << 10;
const PROBE_FLOOD: usize = 40;
/// Small READs between the probe's READ and its flood: one for the top's one-header hold register, the
/// others to wait at the head of RX Parse's pending queue.
const PROBE_WAITING: usize = 3;
/// RX Parse's verdict on every flood frame: not for us.
const FLOOD_REASON: usize = 3;

/// What a fuzz run does.
#[derive(Clone, Debug)]
pub struct FuzzOpts {
    pub frames: u64,
    pub seed: u64,
    /// Frames per chunk (QPs reset, RQs topped up, counters checked between chunks).
    pub chunk: usize,
    /// Where the pcaps go (`rnic-rx.pcap`: every injected frame, in order; `rnic-tx.pcap`).
    pub dir: PathBuf,
    /// Leave out the frames whose verdict RX Parse's cut-frame rule decides ([`RxVerdict::reason`] !=
    /// [`RxVerdict::before_fix`]: truncated frames RX Parse passed before commit 4cf028e, or dropped for their
    /// opcode, TVer or ICRC instead of their length). RX Parse has the rule, so this is off by default: it
    /// only tells a regression of that rule (the run fails without it and passes with it) from anything else.
    pub skip_truncated: bool,
}

impl FuzzOpts {
    pub fn new(frames: u64, seed: u64, dir: &Path) -> Self {
        FuzzOpts { frames, seed, chunk: 1000, dir: dir.to_path_buf(), skip_truncated: false }
    }
}

/// The kinds of frame the fuzzer makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// A well-formed RC request to one of our QPs, mostly at the expected PSN and in a legal opcode sequence.
    Request,
    /// A well-formed RC request with a random opcode, PSN, RETH, payload length and pad.
    WildRequest,
    /// A well-formed response (READ RESPONSE, ACKNOWLEDGE, ATOMIC ACKNOWLEDGE) to one of our QPs.
    Response,
    /// A well-formed request or response to a QPN that does not exist (0, 1, unused, >= 256).
    NoQp,
    /// One field wrong (ethertype, IP version/IHL, protocol, UDP port, destination IP, fragment, TVer,
    /// opcode, P_Key, source IP, IP/UDP length), the ICRC correct.
    WrongField,
    /// A well-formed frame mutated, then its ICRC recomputed where RX Parse checks it.
    MutatedRecrc,
    /// A well-formed frame mutated, its ICRC left as it was.
    Mutated,
    /// ARP: requests for us and for others, replies, other types, VLAN-tagged, truncated, padded.
    Arp,
    /// ICMP to us: echo requests (some padded, some with a trailer), each rule of the echo responder broken
    /// (header checksum, options, fragment, type, cut short, too long, a bad ICMP checksum that is answered
    /// all the same), echo requests to other addresses.
    Icmp,
    /// Random bytes, 14..9000 long (some behind a plausible Ethernet/IPv4/UDP header).
    Raw,
    /// A well-formed SEND ONLY (payload 0..=4096) for an IP that is not ours, sent past flow control behind a
    /// stalled Responder by the overflow probe (see the module documentation); not drawn by weight.
    Flood,
}

/// Kinds and their weights (per 1000 frames).
const KIND_WEIGHTS: [(Kind, u32); 10] = [
    (Kind::Request, 250),
    (Kind::WildRequest, 100),
    (Kind::Response, 80),
    (Kind::NoQp, 50),
    (Kind::WrongField, 100),
    (Kind::MutatedRecrc, 150),
    (Kind::Mutated, 100),
    (Kind::Arp, 50),
    (Kind::Icmp, 30),
    (Kind::Raw, 120),
];

// ------------------------------------------------------------------------------------------------------------
// The reference: RX Parse's verdict and where a good frame goes
// ------------------------------------------------------------------------------------------------------------

/// RX Parse's verdict on one frame and the header fields the top and the Responder route on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxVerdict {
    /// 0: good; else the `rtl::wire::rx_parse::DropReason` (1..=7; 8, overflow, depends on timing, not on the
    /// frame: the run's flow control leaves RX Parse none but the overflow probe's). A frame shorter than
    /// 14 + its IP total length is a length error (Linux drops a datagram its skb does not hold; RX Parse has
    /// checked it since commit 4cf028e).
    pub reason: u8,
    /// The verdict RX Parse gave before its cut-frame fix (commit 4cf028e): the same rules without that one.
    pub before_fix: u8,
    /// The frame is shorter than 14 + its IP total length.
    pub truncated: bool,
    pub opcode: u8,
    pub dest_qpn: u32,
    pub pkey: u16,
    pub src_ip: u32,
    /// Bytes 54..58 as a number: the DETH's Q_Key when the opcode has one (UD).
    pub qkey: u32,
    /// Payload length handed on (UDP length - headers - pad - ICRC; a UD SEND's 40 bytes more, its GRH area),
    /// for a frame good by [`Self::before_fix`].
    pub pay_len: u32,
    /// Good by [`Self::before_fix`], and its payload (as its UDP length gives it) runs past the bytes that
    /// came in.
    pub short: bool,
    /// Good by [`Self::before_fix`], and RX Parse before the fix handed on more payload beats than it wrote to
    /// its payload FIFO for it (`ceil(pay_len / 64)` > one per frame beat after the first, plus the flush,
    /// minus one when the headers end in beat 1): its reader took the missing beats from the frames behind it.
    pub desync: bool,
}

/// Bytes of the frame RX Parse's ICRC engine sees: every beat but the last whole, the last trimmed at
/// 14 + IP total length (mod 64; `rtl::wire::rx_parse::trim_table`), as it never looks at the frame's length.
pub fn icrc_extent(f: &[u8]) -> usize {
    let h = header_bytes(f);
    let ip_total = u16::from_be_bytes([h[16], h[17]]) as usize;
    let nb = f.len().div_ceil(64);
    let last = f.len() - 64 * (nb - 1);
    let r = match (ip_total % 64 + 14) % 64 {
        0 => 64,
        r => r,
    };
    64 * (nb - 1) + last.min(r)
}

/// The first two beats as RX Parse's byte maps capture them: frame bytes, zeros past the end (the MAC model
/// zero-fills a beat past `tkeep`; a one-beat frame never loads beat 1).
fn header_bytes(f: &[u8]) -> [u8; 128] {
    let mut h = [0u8; 128];
    let n = f.len().min(128);
    h[..n].copy_from_slice(&f[..n]);
    h
}

/// RX Parse's verdict on `f` (Ethernet frame without FCS), from the rules of `rtl/src/wire/rx_parse.rs`:
/// the first failing check of IPv4 (ethertype 0x0800 and version/IHL 0x45), UDP (protocol 17, port 4791, not a
/// fragment), destination IP ours, lengths (IP total - UDP length = 20 mod 2^16; UDP length >= 8 + BTH + the
/// opcode's extension headers + pad + ICRC; payload <= 4096; the frame holds 14 + IP total length bytes,
/// the cut-frame rule), opcode in the RX table, TVer 0; then the ICRC: CRC-32 over the all-ones
/// pseudo-LRH and the masked bytes from 14 to [`icrc_extent`] leaves the residue. The header fields come from
/// the first 128 bytes, zeros past the frame's end.
pub fn predict_rx(f: &[u8], my_ip: u32) -> RxVerdict {
    let h = header_bytes(f);
    let be16 = |o: usize| u16::from_be_bytes([h[o], h[o + 1]]);
    let be24 = |o: usize| u32::from_be_bytes([0, h[o], h[o + 1], h[o + 2]]);
    let be32 = |o: usize| u32::from_be_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
    let (ethertype, vihl, ip_total, frag, proto) = (be16(12), h[14], be16(16), be16(20), h[23]);
    let (src_ip, dst_ip, dport, udp_len) = (be32(26), be32(30), be16(36), be16(38));
    let (opcode, bth1) = (h[42], h[43]);
    let op = rx_opcode_table()[opcode as usize];
    let ew = (op & 0xF) as u32;
    let umin = 8 + 12 + 4 + 4 * ew + u32::from(bth1 >> 4 & 3);
    let len_ok = ip_total.wrapping_sub(udp_len) == 20 && u32::from(udp_len) >= umin && u32::from(udp_len) - umin <= MAX_PAYLOAD;
    let truncated = f.len() < 14 + ip_total as usize;
    let verdict = |len_ok: bool| {
        if !(ethertype == ETHERTYPE_IPV4 && vihl == 0x45) {
            1
        } else if !(proto == 17 && dport == 4791 && frag & 0x3FFF == 0) {
            2
        } else if dst_ip != my_ip {
            3
        } else if !len_ok {
            4
        } else if op & 0x10 == 0 {
            5
        } else if bth1 & 0xF != 0 {
            6
        } else if !icrc_residue_ok(f) {
            7
        } else {
            0
        }
    };
    let before_fix = verdict(len_ok);
    let mut v = RxVerdict {
        reason: verdict(len_ok && !truncated),
        before_fix,
        truncated,
        opcode,
        dest_qpn: be24(47),
        pkey: be16(44),
        src_ip,
        qkey: be32(54),
        pay_len: 0,
        short: false,
        desync: false,
    };
    if before_fix == 0 {
        let pay = u32::from(udp_len) - umin;
        let hdr = 14 + 20 + 8 + 12 + 4 * ew as usize;
        v.short = f.len() < hdr + pay as usize;
        // (a UD SEND's payload is handed on behind its 40-byte GRH area, its first beat complete with frame
        // beat 1: the table's bits 5 and 10)
        v.pay_len = pay + if op >> 5 & 1 == 1 { 40 } else { 0 };
        let beats = (f.len().div_ceil(64) - usize::from(op >> 10 & 1 == 0)).min(66);
        v.desync = (v.pay_len as usize).div_ceil(64) > beats;
    }
    v
}

/// The ICRC engine's residue check on what it sees of `f`.
fn icrc_residue_ok(f: &[u8]) -> bool {
    let keep = icrc_extent(f);
    if keep < 14 {
        // the engine would un-advance its register past the start of the datagram: never a residue
        return false;
    }
    let mut d = f[14..keep].to_vec();
    for (b, m) in d.iter_mut().zip(icrc_header_mask(false)) {
        *b |= m;
    }
    !crc32_update(icrc_seed_state(), &d) == RESIDUE
}

/// RX Parse's opcode table (bit 4 accepted, bits 3:0 extension words), computed once.
fn rx_opcode_table() -> &'static [u64] {
    static T: std::sync::OnceLock<Vec<u64>> = std::sync::OnceLock::new();
    T.get_or_init(rtl::wire::rx_parse::rx_opcode_table)
}

/// The Responder's opcode info table (bit 8: not an RC request, dropped as malformed).
fn responder_info() -> &'static [u64] {
    static T: std::sync::OnceLock<Vec<u64>> = std::sync::OnceLock::new();
    T.get_or_init(rtl::transport::responder::info_table)
}

/// Where a frame RX Parse passed goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fate {
    /// VLAN Strip drops it (a tag of another VLAN: `rx_drop_vlan`).
    Vlan,
    /// RX Parse drops it (reason 1..=7).
    Dropped(u8),
    /// A response opcode (READ RESPONSE FIRST .. ATOMIC ACKNOWLEDGE): the Completer (its counters are not in
    /// the counter window).
    Completer,
    /// Not an RC request of the table: `resp_drop_malformed` (no opcode RX Parse passes lands here today:
    /// its table and the top's routing leave only RC requests and the masked atomics to the Responder).
    Malformed,
    /// The QP lookup drops it (`resp_drop_qp_lookup`).
    Lookup,
    /// Past the lookup: `resp_requests`, or `resp_drop_qp_error` when the QP is in error.
    Responder,
}

/// Where a frame with verdict `v` goes, from `rtl/src/rnic.rs` (the top routes opcodes 0x0D..=0x12 to the
/// Completer, everything else to the Responder), the Responder's `Look` state (malformed first, then the
/// lookup) and QP Context's lookup (`rtl/src/transport/qp_context.rs`: QPN 0 or >= 256, an opcode whose transport bits
/// are not RC's (the masked atomics 0xD3/0xD4 count as RC), a QP not in RTR/RTS/SQD/SQE, a source IP that is not the QP's remote IP, a P_Key whose low 15
/// bits are not 0x7FFF; UD: no address check, the DETH's Q_Key must be [`UD_QKEY`]). `live` holds our QPs (QPN
/// and type; in RTS, remote IP `peer_ip`).
pub fn responder_fate(v: &RxVerdict, live: &[(u32, QpType)], peer_ip: u32) -> Fate {
    if v.reason != 0 {
        return Fate::Dropped(v.reason);
    }
    if (RC_RDMA_READ_RESPONSE_FIRST..=RC_ATOMIC_ACKNOWLEDGE).contains(&v.opcode) {
        return Fate::Completer;
    }
    if responder_info()[v.opcode as usize] >> 8 & 1 == 1 {
        return Fate::Malformed;
    }
    let Some(&(_, ty)) = live.iter().find(|q| q.0 == v.dest_qpn) else {
        return Fate::Lookup;
    };
    let ud = ty == QpType::Ud;
    let own = match ty {
        QpType::Rc => RC_SEND_ONLY,
        QpType::Uc => UC_SEND_ONLY,
        QpType::Ud => UD_SEND_ONLY,
    };
    let drop = v.dest_qpn == 0
        || v.dest_qpn >= 256
        || transport_bits(v.opcode) != transport_bits(own)
        || (v.src_ip != peer_ip && !ud)
        || v.pkey & 0x7FFF != 0x7FFF
        || (ud && v.qkey != UD_QKEY);
    if drop {
        Fate::Lookup
    } else {
        Fate::Responder
    }
}

/// ICMP to our address (what the echo responder counts, answered or not): IPv4, protocol 1, destination
/// ours, reading zeros past the end of the frame.
fn icmp_to_us(f: &[u8]) -> bool {
    let b = |i: usize| f.get(i).copied().unwrap_or(0);
    (b(12), b(13), b(23)) == (0x08, 0x00, IP_PROTO_ICMP) && u32::from_be_bytes([b(30), b(31), b(32), b(33)]) == OUR_IP
}

/// An ARP request the ARP responder answers (`rtl/src/wire/arp.rs`): untagged, >= 42 bytes, the ARP template
/// (Ethernet/IPv4, oper 1) and our IP as the target.
fn arp_request_for_us(f: &[u8]) -> bool {
    f.len() >= 42
        && f[12..14] == ETHERTYPE_ARP.to_be_bytes()
        && f[14..22] == [0, 1, 8, 0, 6, 4, 0, 1]
        && f[38..42] == OUR_IP.to_be_bytes()
}

/// An ARP frame as the ARP responder tells one (`rtl/src/wire/arp.rs`, its `ignored` counter): ethertype ARP
/// after the two MACs, or after one 802.1Q tag, within the frame. Every such frame that is not a request for
/// us ([`arp_request_for_us`]) is counted ignored; frames of other ethertypes are not counted.
fn arp_frame(f: &[u8]) -> bool {
    let arp = ETHERTYPE_ARP.to_be_bytes();
    (f.len() >= 14 && f[12..14] == arp) || (f.len() >= 18 && f[12..14] == [0x81, 0x00] && f[16..18] == arp)
}

/// Put a correct ICRC where RX Parse looks for it (the end of [`icrc_extent`]), so that a frame whose headers
/// still look right reaches the transport whatever was done to its bytes or its length.
pub fn recrc_at_rx_extent(f: &mut [u8]) {
    let keep = icrc_extent(f);
    if keep >= 14 + 4 {
        let c = icrc(&f[14..keep - 4]);
        f[keep - 4..keep].copy_from_slice(&c.to_le_bytes());
    }
}

// ------------------------------------------------------------------------------------------------------------
// The generator
// ------------------------------------------------------------------------------------------------------------

/// Our side as the generator sees it.
#[derive(Clone, Debug)]
struct QpGen {
    qpn: u32,
    mtu: u32,
    /// The PSN the next in-sequence request gets (the generator's belief; frames lost to overflow or errors
    /// make it wrong, which is fine).
    epsn: u32,
    /// Our send PSN (responses aim near it).
    sq_psn: u32,
    /// A multi-packet SEND (false) or WRITE (true) in progress and its bytes left.
    msg: Option<(bool, u32)>,
    /// Well-formed requests here aim at the MR and carry no atomics (fewer class-C errors, so the QP lives
    /// longer and its data path is exercised); wild and mutated frames still reach it.
    clean: bool,
    /// A UC QP: its well-formed SENDs and WRITEs carry the UC opcodes.
    uc: bool,
    /// A UD QP: its well-formed requests are UD SENDs with the DETH.
    ud: bool,
}

/// The UC form of an RC SEND or WRITE opcode (RC + 0x20), `None` for the others (UC has no READ, atomic or
/// SEND with invalidate).
fn uc_op(rc: u8) -> Option<u8> {
    (rc <= RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE).then(|| rc + (UC_SEND_FIRST - RC_SEND_FIRST))
}

/// Registered memory the generator aims at.
#[derive(Clone, Copy, Debug)]
struct Mrs {
    x_base: u64,
    x_key: u32,
    ro_base: u64,
    ro_key: u32,
    src_base: u64,
    src_key: u32,
    /// Start of the whole fuzz allocation (canaries included).
    buf: u64,
}

/// Header fields of one packet to build.
#[derive(Clone, Debug)]
struct Plan {
    opcode: u8,
    dest_qpn: u32,
    psn: u32,
    ack_req: bool,
    pkey: u16,
    src_ip: u32,
    reth: Option<(u64, u32, u32)>,
    aeth: Option<(u8, u32)>,
    atomic: Option<(u64, u32)>,
    payload: u32,
    pad: Option<u8>,
    /// The DETH's Q_Key (else random bytes, as every header the plan does not set).
    qkey: Option<u32>,
}

const RC_REQUEST_OPS: [u8; 21] = [
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x13, 0x14, 0x16, 0x17, 0x1C, 0x1D,
    MASKED_COMPARE_SWAP, MASKED_FETCH_ADD,
];
const RESPONSE_OPS: [u8; 6] = [0x0D, 0x0E, 0x0F, 0x10, 0x11, 0x12];
/// Opcodes of other transports the golden model can build (RX Parse takes UC's; the lookup drops a UC opcode
/// at an RC QP and an RC one at a UC QP).
const OTHER_OPS: [u8; 6] = [UC_SEND_ONLY, UC_RDMA_WRITE_ONLY, UD_SEND_ONLY, RD_SEND_ONLY, RD_RDMA_READ_REQUEST, CNP];

struct Gen {
    rng: SmallRng,
    qps: Vec<QpGen>,
    mrs: Mrs,
    peer_mac: MacAddr,
    peer_ip: u32,
}

impl Gen {
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.rng.gen_range(0..xs.len())]
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        self.rng.fill(&mut v[..]);
        v
    }

    fn kind(&mut self) -> Kind {
        let mut x = self.rng.gen_range(0..KIND_WEIGHTS.iter().map(|k| k.1).sum::<u32>());
        for (k, w) in KIND_WEIGHTS {
            if x < w {
                return k;
            }
            x -= w;
        }
        unreachable!()
    }

    /// One frame of `kind`. Only well-formed requests and wild requests move the PSN belief; the frames made
    /// from a request and then damaged leave it as it was.
    fn frame(&mut self, kind: Kind) -> Vec<u8> {
        if !matches!(kind, Kind::Request | Kind::WildRequest) {
            let keep = self.qps.clone();
            let f = self.frame_of(kind);
            self.qps = keep;
            return f;
        }
        self.frame_of(kind)
    }

    fn frame_of(&mut self, kind: Kind) -> Vec<u8> {
        match kind {
            Kind::Request => {
                let q = self.rng.gen_range(0..self.qps.len());
                let p = self.sane_request(q);
                self.build(&p)
            }
            Kind::WildRequest => {
                let q = self.rough_qp();
                let p = self.wild_request(q);
                self.build(&p)
            }
            Kind::Response => {
                let q = self.rough_qp();
                let p = self.response(q);
                self.build(&p)
            }
            Kind::NoQp => {
                let q = self.rough_qp();
                let mut p = if self.rng.gen_bool(0.7) { self.wild_request(q) } else { self.response(q) };
                let top = self.qps.iter().map(|q| q.qpn).max().unwrap();
                p.dest_qpn = match self.rng.gen_range(0..5) {
                    0 => 0,
                    1 => 1,
                    2 => self.rng.gen_range(2..0x11),
                    3 => self.rng.gen_range(top + 1..256),
                    _ => self.rng.gen_range(256..1 << 24),
                };
                self.build(&p)
            }
            Kind::WrongField => self.wrong_field(),
            Kind::MutatedRecrc | Kind::Mutated => {
                let q = self.rough_qp();
                let p = match self.rng.gen_range(0..10) {
                    0..=5 => self.sane_request(q),
                    6 | 7 => self.wild_request(q),
                    _ => self.response(q),
                };
                let mut f = self.build(&p);
                for _ in 0..self.rng.gen_range(1..=3) {
                    self.mutate(&mut f);
                }
                if kind == Kind::MutatedRecrc {
                    recrc_at_rx_extent(&mut f);
                }
                f
            }
            Kind::Arp => self.arp(),
            Kind::Icmp => self.icmp(),
            Kind::Raw => self.raw(),
            Kind::Flood => self.flood_frame(),
        }
    }

    /// A SEND ONLY to a QP of ours for an IP that is not ours: RX Parse drops it as not for us (when it has
    /// room for it), whatever its length.
    fn flood_frame(&mut self) -> Vec<u8> {
        let q = self.rough_qp();
        let mut p = self.plan(q, RC_SEND_ONLY, self.qps[q].epsn);
        p.payload = self.rng.gen_range(0..=MAX_PAYLOAD);
        let mut f = self.build(&p);
        let ip = OUR_IP ^ self.rng.gen_range(1..=u32::MAX);
        f[30..34].copy_from_slice(&ip.to_be_bytes());
        recrc_at_rx_extent(&mut f);
        f
    }

    /// The overflow probe's frames (see the module documentation): an RDMA READ of [`PROBE_READ`] bytes on a
    /// clean QP, at its ePSN and inside the MR (the Responder streams its responses), [`PROBE_WAITING`] small
    /// READs behind it on the same QP (the first waits in the top's hold register, the next at the head of RX
    /// Parse's pending queue, while the Responder streams), then [`PROBE_FLOOD`] [`Kind::Flood`] frames, more
    /// payload-FIFO beats than RX Parse has room for.
    /// Called right after the QPs were brought back, so the ePSN is known.
    fn stall_and_flood(&mut self) -> Vec<(Kind, Vec<u8>)> {
        let q = (0..self.qps.len()).find(|&i| self.qps[i].clean).expect("a clean QP");
        let (mtu, epsn) = (self.qps[q].mtu, self.qps[q].epsn);
        let va = self.mrs.x_base + self.rng.gen_range(0..=MR_LEN - u64::from(PROBE_READ));
        let mut big = self.plan(q, RC_RDMA_READ_REQUEST, epsn);
        big.reth = Some((va, self.mrs.x_key, PROBE_READ));
        let mut v = vec![(Kind::Request, self.build(&big))];
        let mut next = (epsn + PROBE_READ.div_ceil(mtu)) & 0xFF_FFFF;
        for _ in 0..PROBE_WAITING {
            let mut small = self.plan(q, RC_RDMA_READ_REQUEST, next);
            small.reth = Some((va, self.mrs.x_key, 64));
            v.push((Kind::Request, self.build(&small)));
            next = (next + 1) & 0xFF_FFFF;
        }
        self.qps[q].epsn = next;
        for _ in 0..PROBE_FLOOD {
            let f = self.frame(Kind::Flood);
            v.push((Kind::Flood, f));
        }
        v
    }

    /// A QP that takes every kind of frame (the clean ones get well-formed requests only).
    fn rough_qp(&mut self) -> usize {
        let rough: Vec<usize> = (0..self.qps.len()).filter(|&i| !self.qps[i].clean).collect();
        self.pick(&rough)
    }

    /// A length with many small values and a long tail.
    fn len_upto(&mut self, max: u32) -> u32 {
        match self.rng.gen_range(0..10) {
            0..=5 => self.rng.gen_range(0..=max.min(256)),
            6..=8 => self.rng.gen_range(0..=max.min(4096)),
            _ => self.rng.gen_range(0..=max),
        }
    }

    /// (VA, rkey) for an access of `len` bytes: half inside the fuzz MR, else past its ends, in the read-only
    /// MR, in the rig's MR, with a wrong key tag, an unregistered key index, or random (`clean`: inside).
    fn target(&mut self, len: u32, clean: bool) -> (u64, u32) {
        let m = self.mrs;
        let l = u64::from(len);
        let inside = |rng: &mut SmallRng, base: u64, size: u64| base + rng.gen_range(0..=size.saturating_sub(l.min(size)));
        let roll = if clean { 0 } else { self.rng.gen_range(0..100) };
        match roll {
            0..=49 => (inside(&mut self.rng, m.x_base, MR_LEN), m.x_key),
            50..=53 => (m.x_base + MR_LEN - self.rng.gen_range(0..=l.min(MR_LEN)), m.x_key),
            54..=57 => (m.x_base - self.rng.gen_range(1..=4096), m.x_key),
            58..=65 => (inside(&mut self.rng, m.ro_base, RO_LEN), m.ro_key),
            66..=73 => (inside(&mut self.rng, m.src_base, 2 << 20), m.src_key),
            74..=81 => (inside(&mut self.rng, m.x_base, MR_LEN), m.x_key ^ self.rng.gen_range(1..=255)),
            82..=89 => (inside(&mut self.rng, m.x_base, MR_LEN), (self.rng.gen_range(8..1024) << 8) | self.rng.gen_range(0..256)),
            _ => (self.rng.gen(), self.rng.gen()),
        }
    }

    fn plan(&self, q: usize, opcode: u8, psn: u32) -> Plan {
        Plan {
            opcode,
            dest_qpn: self.qps[q].qpn,
            psn: psn & 0xFF_FFFF,
            ack_req: false,
            pkey: 0xFFFF,
            src_ip: self.peer_ip,
            reth: None,
            aeth: None,
            atomic: None,
            payload: 0,
            pad: None,
            qkey: None,
        }
    }

    /// A UD SEND (with or without immediate) to UD QP `q`: any PSN (UD has no order), mostly the QP's Q_Key,
    /// a payload of up to the MTU (the clean QP) or up to 4096 bytes.
    fn ud_request(&mut self, q: usize) -> Plan {
        let psn = self.rng.gen();
        let op = self.pick(&[UD_SEND_ONLY, UD_SEND_ONLY, UD_SEND_ONLY_WITH_IMMEDIATE]);
        let mut p = self.plan(q, op, psn);
        let clean = self.qps[q].clean;
        p.qkey = Some(if clean || self.rng.gen_bool(0.85) { UD_QKEY } else { self.rng.gen() });
        p.payload = if clean || self.rng.gen_bool(0.7) { self.len_upto(self.qps[q].mtu) } else { self.rng.gen_range(0..=4096) };
        p
    }

    /// A request in a legal opcode sequence, mostly at the expected PSN.
    fn sane_request(&mut self, q: usize) -> Plan {
        if self.qps[q].ud {
            return self.ud_request(q);
        }
        let mtu = self.qps[q].mtu;
        let clean = self.qps[q].clean;
        let epsn = self.qps[q].epsn;
        let psn = match self.rng.gen_range(0..100) {
            0..=89 => epsn,
            90..=96 => epsn.wrapping_sub(self.rng.gen_range(1..8)),
            _ => epsn.wrapping_add(self.rng.gen_range(1..8)),
        } & 0xFF_FFFF;
        let mut packets = 1;
        let mut p = self.plan(q, RC_SEND_ONLY, psn);
        p.ack_req = self.rng.gen_bool(0.6);
        let cont = self.qps[q].msg.filter(|_| clean || self.rng.gen_bool(0.9));
        if let Some((write, left)) = cont {
            if left > mtu {
                p.opcode = if write { RC_RDMA_WRITE_MIDDLE } else { RC_SEND_MIDDLE };
                p.payload = mtu;
                self.qps[q].msg = Some((write, left - mtu));
            } else {
                p.opcode = if write {
                    self.pick(&[RC_RDMA_WRITE_LAST, RC_RDMA_WRITE_LAST_WITH_IMMEDIATE])
                } else {
                    self.pick(&[RC_SEND_LAST, RC_SEND_LAST_WITH_IMMEDIATE, RC_SEND_LAST_WITH_INVALIDATE])
                };
                p.payload = left;
                self.qps[q].msg = None;
            }
        } else {
            self.qps[q].msg = None;
            match self.rng.gen_range(0..100) {
                0..=24 => {
                    p.opcode = self.pick(&[RC_SEND_ONLY, RC_SEND_ONLY, RC_SEND_ONLY_WITH_IMMEDIATE, RC_SEND_ONLY_WITH_INVALIDATE]);
                    p.payload = self.len_upto(mtu);
                }
                25..=34 => {
                    p.opcode = RC_SEND_FIRST;
                    p.payload = mtu;
                    let total = self.rng.gen_range(mtu + 1..=4 * mtu);
                    self.qps[q].msg = Some((false, total - mtu));
                }
                35..=59 => {
                    p.opcode = self.pick(&[RC_RDMA_WRITE_ONLY, RC_RDMA_WRITE_ONLY, RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE]);
                    p.payload = self.len_upto(mtu);
                    let (va, key) = self.target(p.payload, clean);
                    p.reth = Some((va, key, p.payload));
                }
                60..=69 => {
                    p.opcode = RC_RDMA_WRITE_FIRST;
                    p.payload = mtu;
                    let total = self.rng.gen_range(mtu + 1..=4 * mtu);
                    let (va, key) = self.target(total, clean);
                    p.reth = Some((va, key, total));
                    self.qps[q].msg = Some((true, total - mtu));
                }
                70..=94 => {
                    p.opcode = RC_RDMA_READ_REQUEST;
                    let len = match self.rng.gen_range(0..100) {
                        0..=59 => self.rng.gen_range(0..=2 * mtu),
                        60..=89 => self.rng.gen_range(0..=16 << 10),
                        90..=98 => self.rng.gen_range(0..=64 << 10),
                        _ => self.rng.gen_range(0..=1 << 20),
                    };
                    let (va, key) = self.target(len, clean);
                    p.reth = Some((va, key, len));
                    packets = len.div_ceil(mtu).max(1);
                }
                _ if clean => {
                    p.opcode = RC_SEND_ONLY;
                    p.payload = self.len_upto(mtu);
                }
                _ => {
                    p.opcode = self.pick(&[RC_COMPARE_SWAP, RC_FETCH_ADD, MASKED_COMPARE_SWAP, MASKED_FETCH_ADD]);
                    let (va, key) = self.target(8, false);
                    p.atomic = Some((va & !7, key));
                }
            }
        }
        if self.qps[q].uc {
            match uc_op(p.opcode) {
                Some(op) => p.opcode = op,
                // a READ or atomic on a UC QP: the lookup drops it (another transport), no PSN taken
                None => packets = 0,
            }
        }
        if psn == epsn {
            self.qps[q].epsn = (epsn + packets) & 0xFF_FFFF;
        }
        p
    }

    /// A request with a random RC opcode, PSN, RETH, payload length and pad.
    fn wild_request(&mut self, q: usize) -> Plan {
        if self.qps[q].ud && self.rng.gen_bool(0.6) {
            // a UD SEND with a random PSN, pad, AckReq, payload length and (sometimes) Q_Key
            let mut p = self.ud_request(q);
            p.ack_req = self.rng.gen();
            p.payload = self.rng.gen_range(0..=4200);
            if self.rng.gen_bool(0.3) {
                p.pad = Some(self.rng.gen_range(0..4));
            }
            if self.rng.gen_bool(0.2) {
                p.qkey = Some(self.rng.gen());
            }
            return p;
        }
        let op = self.pick(&RC_REQUEST_OPS);
        // (a UC QP: mostly the UC form of a SEND or WRITE opcode, else the RC opcode its lookup drops)
        let op = if self.qps[q].uc && self.rng.gen_bool(0.8) { uc_op(op).unwrap_or(op) } else { op };
        let epsn = self.qps[q].epsn;
        let psn = match self.rng.gen_range(0..4) {
            0 | 1 => epsn,
            2 => epsn.wrapping_add(self.rng.gen_range(0..32)).wrapping_sub(16),
            _ => self.rng.gen(),
        };
        let mut p = self.plan(q, op, psn);
        p.ack_req = self.rng.gen();
        let info = opcode::info(op).unwrap();
        if info.payload {
            let mtu = self.qps[q].mtu;
            p.payload = match self.rng.gen_range(0..5) {
                0 | 1 => self.rng.gen_range(0..=mtu),
                2 | 3 => self.rng.gen_range(0..=4096),
                _ => self.rng.gen_range(0..=4200),
            };
        }
        let dlen = match self.rng.gen_range(0..10) {
            0..=4 => p.payload,
            5..=7 => self.rng.gen_range(0..=1 << 20),
            _ => self.rng.gen(),
        };
        let (va, key) = self.target(dlen, false);
        p.reth = Some((va, key, dlen));
        p.atomic = Some((va, key));
        if self.rng.gen_bool(0.3) {
            p.pad = Some(self.rng.gen_range(0..4));
        }
        if psn & 0xFF_FFFF == epsn {
            let n = if op == RC_RDMA_READ_REQUEST { dlen.div_ceil(self.qps[q].mtu).max(1) } else { 1 };
            self.qps[q].epsn = (epsn + n) & 0xFF_FFFF;
        }
        p
    }

    /// Learn the responder's ePSN from a frame the RNIC sent to the peer QP `peer_qpn`'s partner: a NAK
    /// (sequence error, RNR, class C) carries it, an ACK or a read response the PSN before it.
    fn resync(&mut self, q: usize, f: &RoceFrame) {
        let psn = f.packet.bth.psn;
        let g = &mut self.qps[q];
        match (f.packet.bth.opcode, f.packet.aeth().map(|a| a.kind())) {
            (RC_ACKNOWLEDGE, Some(AethKind::Ack { .. })) => g.epsn = (psn + 1) & 0xFF_FFFF,
            (RC_ACKNOWLEDGE, _) => {
                g.epsn = psn;
                g.msg = None;
            }
            (RC_RDMA_READ_RESPONSE_LAST | RC_RDMA_READ_RESPONSE_ONLY, _) => g.epsn = (psn + 1) & 0xFF_FFFF,
            _ => {}
        }
    }

    /// A response near our send PSN with a random AETH.
    fn response(&mut self, q: usize) -> Plan {
        let op = self.pick(&RESPONSE_OPS);
        let sq = self.qps[q].sq_psn;
        let psn = if self.rng.gen_bool(0.5) { sq.wrapping_sub(self.rng.gen_range(0..4)) } else { self.rng.gen() };
        let mut p = self.plan(q, op, psn);
        let syn = match self.rng.gen_range(0..20) {
            0..=11 => AETH_ACK_UNLIMITED,
            12 | 13 => self.rng.gen_range(0..0x20),
            14 | 15 => 0x20 | self.rng.gen_range(0..0x20),
            16..=18 => 0x60 | self.rng.gen_range(0..5),
            _ => self.rng.gen(),
        };
        p.aeth = Some((syn, self.rng.gen_range(0..1 << 24)));
        let mtu = self.qps[q].mtu;
        if opcode::info(op).unwrap().payload {
            p.payload = if matches!(op, RC_RDMA_READ_RESPONSE_FIRST | RC_RDMA_READ_RESPONSE_MIDDLE) && self.rng.gen_bool(0.7) {
                mtu
            } else {
                self.rng.gen_range(0..=mtu)
            };
        }
        p
    }

    /// Build `p` with the golden wire model (peer's MAC and source port, our MAC and IP; the ICRC correct).
    fn build(&mut self, p: &Plan) -> Vec<u8> {
        let info = opcode::info(p.opcode).expect("an opcode of the table");
        let mut ext = Vec::new();
        for &k in info.headers {
            let raw = self.bytes(k.len());
            let mut h = ExtHeader::parse(k, &raw).expect("any bytes make a header").0;
            match &mut h {
                ExtHeader::Reth(r) => {
                    if let Some((va, rkey, dma_len)) = p.reth {
                        *r = Reth { va, rkey, dma_len };
                    }
                }
                ExtHeader::Aeth(a) => {
                    if let Some((s, msn)) = p.aeth {
                        a.syndrome = s;
                        a.msn = msn & 0xFF_FFFF;
                    }
                }
                ExtHeader::AtomicEth(a) => {
                    if let Some((va, rkey)) = p.atomic {
                        a.va = va;
                        a.rkey = rkey;
                    }
                }
                ExtHeader::MaskedCmpSwapEth(a) => {
                    if let Some((va, rkey)) = p.atomic {
                        a.va = va;
                        a.rkey = rkey;
                    }
                }
                ExtHeader::MaskedFetchAddEth(a) => {
                    if let Some((va, rkey)) = p.atomic {
                        a.va = va;
                        a.rkey = rkey;
                    }
                }
                ExtHeader::Deth(d) => {
                    if let Some(k) = p.qkey {
                        d.qkey = k;
                    }
                }
                _ => {}
            }
            ext.push(h);
        }
        let payload = if info.payload { self.bytes(p.payload as usize) } else { Vec::new() };
        let mut bth = Bth::new(p.opcode, p.dest_qpn & 0xFF_FFFF, p.psn & 0xFF_FFFF);
        bth.ack_req = p.ack_req;
        bth.se = self.rng.gen_bool(0.2);
        bth.pkey = p.pkey;
        let mut pkt = RocePacket::new(bth, ext, payload);
        if let Some(pc) = p.pad {
            pkt.bth.pad_cnt = pc & 3;
            pkt.pad = vec![0; (pc & 3) as usize];
        }
        let sport = 0xC000 | (self.rng.gen::<u16>() & 0x3FFF);
        let f = RoceFrame::ipv4(self.peer_mac, MacAddr(OUR_MAC), Ipv4Addr::from(p.src_ip), Ipv4Addr::from(OUR_IP), sport, pkt);
        f.build().expect("a packet of at most 4200 bytes builds")
    }

    /// A well-formed request with one header field made wrong, the ICRC recomputed.
    fn wrong_field(&mut self) -> Vec<u8> {
        let q = self.rough_qp();
        let mut p = self.sane_request(q);
        let which = self.rng.gen_range(0..13);
        match which {
            10 => p.pkey = if self.rng.gen_bool(0.3) { 0x7FFF } else { self.rng.gen::<u16>() & 0x7FFE },
            11 => p.src_ip = self.rng.gen(),
            12 => {
                // a whole frame of another transport, as the golden model builds it
                p.opcode = self.pick(&OTHER_OPS);
                p.payload = p.payload.min(1024);
            }
            _ => {}
        }
        let mut f = self.build(&p);
        let be = |v: u16| v.to_be_bytes();
        let (r8, r16): (u8, u16) = (self.rng.gen(), self.rng.gen());
        match which {
            0 => f[12..14].copy_from_slice(&be(self.pick(&[0x86DD, 0x8100, 0x0806, 0x8915, 0x88B5, r16]))),
            1 => f[14] = self.pick(&[0x46, 0x44, 0x4F, 0x55, 0x65, 0x05, r8]),
            2 => f[23] = self.pick(&[6, 1, 0, 0x11 ^ 0x80, r8]),
            3 => {
                let port = self.pick(&[4790, 4792, 4791 ^ 0x100, 0, r16]);
                f[36..38].copy_from_slice(&be(port));
            }
            4 => {
                let ip = if self.rng.gen_bool(0.5) { OUR_IP ^ (1 << self.rng.gen_range(0..32)) } else { self.rng.gen() };
                f[30..34].copy_from_slice(&ip.to_be_bytes());
            }
            5 => {
                let v = if self.rng.gen_bool(0.5) { 0x2000 } else { self.rng.gen_range(1..0x2000) } | (u16::from(self.rng.gen_bool(0.5)) << 14);
                f[20..22].copy_from_slice(&be(v));
            }
            6 => f[43] = (f[43] & 0xF0) | self.rng.gen_range(1..16),
            7 => {
                // an opcode outside RX Parse's table, written over a well-formed packet
                let op = loop {
                    let op: u8 = self.rng.gen();
                    if rx_opcode_table()[op as usize] & 0x10 == 0 {
                        break op;
                    }
                };
                f[42] = op;
            }
            8 => {
                let d: i32 = self.pick(&[-1, 1, -4, 4, 64, -64, 2000]);
                let v = (u16::from_be_bytes([f[16], f[17]]) as i32 + d) as u16;
                f[16..18].copy_from_slice(&be(v));
            }
            9 => {
                let v = self.rng.gen::<u16>();
                f[38..40].copy_from_slice(&be(v));
            }
            _ => {}
        }
        recrc_at_rx_extent(&mut f);
        f
    }

    /// One mutation of a built frame.
    fn mutate(&mut self, f: &mut Vec<u8>) {
        match self.rng.gen_range(0..10) {
            0..=2 => {
                // bit flips, half of the time in the headers
                for _ in 0..self.rng.gen_range(1..=8) {
                    let end = if self.rng.gen_bool(0.5) { f.len().min(70) } else { f.len() };
                    let at = self.rng.gen_range(0..end);
                    f[at] ^= 1 << self.rng.gen_range(0..8);
                }
            }
            3 | 4 => {
                for _ in 0..self.rng.gen_range(1..=4) {
                    let at = self.rng.gen_range(0..f.len());
                    f[at] = self.rng.gen();
                }
            }
            5 | 6 => {
                // truncation (to at least an Ethernet header)
                if f.len() > 14 {
                    let n = self.rng.gen_range(14..f.len());
                    f.truncate(n);
                }
            }
            7 => {
                let n = self.rng.gen_range(1..=300);
                let extra = self.bytes(n);
                f.extend_from_slice(&extra);
            }
            _ => {
                // one header byte (Ethernet .. extension headers) set at random
                let at = self.rng.gen_range(12..f.len().min(74));
                f[at] = self.rng.gen();
            }
        }
    }

    fn icmp(&mut self) -> Vec<u8> {
        let n = self.rng.gen_range(0..1200);
        let payload = self.bytes(n);
        let dst = if self.rng.gen_ratio(1, 10) { OUR_IP ^ self.rng.gen_range(1..=255) } else { OUR_IP };
        let mut f = icmp_echo_request(self.peer_mac, Ipv4Addr::from(self.rng.gen::<u32>()), MacAddr(OUR_MAC), Ipv4Addr::from(dst), self.rng.gen(), self.rng.gen(), &payload);
        let fix = |f: &mut Vec<u8>| {
            f[24..26].copy_from_slice(&[0, 0]);
            let c = internet_checksum(&f[14..34]);
            f[24..26].copy_from_slice(&c.to_be_bytes());
        };
        match self.rng.gen_range(0..12) {
            0 => f[14 + self.rng.gen_range(0..20)] ^= 1 << self.rng.gen_range(0..8),
            1 => {
                f[14] = 0x46;
                fix(&mut f);
            }
            2 => {
                f[20] |= 0x20;
                fix(&mut f);
            }
            3 => f[34] = self.rng.gen_range(0..8),
            4 => {
                let cut = self.rng.gen_range(1..f.len() - 14);
                f.truncate(f.len() - cut);
            }
            5 => {
                f[16] = 0x23;
                f[17] = self.rng.gen_range(0x29..=0xFF);
                fix(&mut f);
            }
            6 => f[36] ^= 1 << self.rng.gen_range(0..8),
            7 => {
                let extra = self.rng.gen_range(1..100);
                let b = self.bytes(extra);
                f.extend_from_slice(&b);
            }
            _ => {
                if f.len() < 60 {
                    f.resize(60, 0);
                }
            }
        }
        f
    }

    fn arp(&mut self) -> Vec<u8> {
        let sha = MacAddr([2, self.rng.gen(), self.rng.gen(), self.rng.gen(), self.rng.gen(), self.rng.gen()]);
        let spa = Ipv4Addr::from(self.rng.gen::<u32>());
        let for_us = Ipv4Addr::from(OUR_IP);
        let mut f = match self.rng.gen_range(0..10) {
            0..=3 => ArpFrame::request(sha, spa, for_us).build(),
            4 => ArpFrame::request(sha, spa, Ipv4Addr::from(OUR_IP ^ self.rng.gen_range(1..=255))).build(),
            5 => ArpFrame::request(sha, spa, for_us).reply_from(sha).build(),
            6 => {
                let mut f = ArpFrame::request(sha, spa, for_us).build();
                f[self.rng.gen_range(14..22)] ^= 1 << self.rng.gen_range(0..8);
                f
            }
            7 => {
                // tagged with 802.1Q: a priority tag (VID 0) is removed by VLAN Strip and the request answered
                // untagged; any other VID is dropped by VLAN Strip (the port is on no VLAN)
                let mut f = ArpFrame::request(sha, spa, for_us).build();
                let vid = if self.rng.gen_bool(0.5) { 0 } else { self.rng.gen_range(1..0xFFF) };
                f.splice(12..12, [0x81, 0x00, (vid >> 8) as u8 | self.rng.gen::<u8>() & 0xF0, vid as u8]);
                f
            }
            8 => {
                let mut f = ArpFrame::request(sha, spa, for_us).build();
                f.truncate(self.rng.gen_range(14..42));
                f
            }
            _ => {
                let mut f = ArpFrame::request(sha, spa, for_us).build();
                let extra = self.rng.gen_range(0..200);
                let b = self.bytes(extra);
                f.extend_from_slice(&b);
                f
            }
        };
        if self.rng.gen_bool(0.1) {
            // no Ethernet padding
            f.truncate(42);
        }
        f
    }

    fn raw(&mut self) -> Vec<u8> {
        let n = match self.rng.gen_range(0..10) {
            0..=5 => self.rng.gen_range(14..=128),
            6..=8 => self.rng.gen_range(129..=1600),
            _ => self.rng.gen_range(1601..=9000),
        };
        let mut f = self.bytes(n);
        if self.rng.gen_bool(0.3) {
            // a plausible start: our MAC, IPv4, UDP to 4791 for our IP, the rest random
            let head: [(usize, &[u8]); 4] =
                [(0, &OUR_MAC), (12, &[0x08, 0x00, 0x45]), (23, &[17]), (30, &OUR_IP.to_be_bytes())];
            for (at, b) in head {
                if at + b.len() <= f.len() {
                    f[at..at + b.len()].copy_from_slice(b);
                }
            }
            if f.len() >= 38 {
                f[36..38].copy_from_slice(&4791u16.to_be_bytes());
            }
        }
        f
    }

    /// A receive WQE: mostly a buffer in the fuzz MR, else one running past its end, one in the read-only MR
    /// (no LOCAL_WRITE), a foreign lkey, or unregistered memory behind the MR's lkey (`clean`: 16 KiB or more
    /// in the MR, room for any message a clean QP gets).
    fn recv_wqe(&mut self, wr_id: u64, clean: bool) -> RecvWqe {
        let m = self.mrs;
        let len = if clean { self.rng.gen_range(16 << 10..=64 << 10) } else { self.len_upto(16 << 10) };
        let l = u64::from(len);
        let roll = if clean { 0 } else { self.rng.gen_range(0..100) };
        let (addr, lkey) = match roll {
            0..=69 => (m.x_base + self.rng.gen_range(0..=MR_LEN - l), m.x_key),
            70..=79 => (m.x_base + MR_LEN - self.rng.gen_range(0..=l.min(MR_LEN)), m.x_key),
            80..=87 => (m.ro_base + self.rng.gen_range(0..=RO_LEN.saturating_sub(l)), m.ro_key),
            88..=93 => (m.x_base + self.rng.gen_range(0..=MR_LEN - l), self.rng.gen()),
            _ => (m.buf + self.rng.gen_range(0..CANARY - l.min(CANARY)), m.x_key),
        };
        RecvWqe { wr_id, addr, length: len, lkey }
    }
}

// ------------------------------------------------------------------------------------------------------------
// The run
// ------------------------------------------------------------------------------------------------------------

/// Per-kind tallies: frames, and the reference verdicts.
#[derive(Clone, Debug, Default)]
pub struct KindStats {
    pub frames: u64,
    pub fates: BTreeMap<Fate, u64>,
    /// Truncated frames RX Parse passed before its cut-frame fix, and of those the ones that desynchronised its
    /// payload FIFO (tallies of what the fix decides; RX Parse now drops them all as length errors).
    pub passed_truncated: u64,
    pub desync: u64,
}

/// What a run saw.
#[derive(Clone, Debug, Default)]
pub struct FuzzReport {
    pub seed: u64,
    pub frames: u64,
    pub chunks: u64,
    /// Chunks whose every counter identity held exactly ([`check_chunk`]); with no failure, every chunk.
    pub exact_chunks: u64,
    /// Frames flow control held back until RX Parse had room for them (at the link rate and paced alike),
    /// the cycles they waited in all, and of them the frames held while the link had sent everything before
    /// them (so the frames not yet counted were inside the RNIC: RX Parse backed up to the room rule's bound).
    pub held_frames: u64,
    pub held_cycles: u64,
    pub backed_up: u64,
    /// Overflow probes run, and the frames they sent past flow control (their overflow drops are the
    /// `rx_drop_overflow` counter: nothing else may overflow).
    pub probes: u64,
    pub flood_frames: u64,
    pub kinds: BTreeMap<Kind, KindStats>,
    /// Final value of every counter of the window (`sim::rxe::rtl_ep::counter_names`).
    pub counters: Vec<(String, u64)>,
    /// Frames the RNIC sent: ACK/NAK by kind, read responses, ARP replies.
    pub tx: BTreeMap<String, u64>,
    pub cqes: BTreeMap<String, u64>,
    /// Successful receive completions on the UD QPs (each with its GRH area checked).
    pub ud_receives: u64,
    pub cycles: u64,
    pub secs: f64,
    /// Frames generated and left out ([`FuzzOpts::skip_truncated`]).
    pub skipped_truncated: u64,
    pub problems: Vec<String>,
}

impl FuzzReport {
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

impl fmt::Display for FuzzReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "rnic fuzz: seed {}, {} frames in {} chunks ({} checked exactly), {} held back for RX Parse's room ({} cycles; {} with the link idle, RX Parse backed up), {} cycles ({:.3} s simulated) in {:.1} s: {:.0} frames/s, {:.3} M cycles/s",
            self.seed,
            self.frames,
            self.chunks,
            self.exact_chunks,
            self.held_frames,
            self.held_cycles,
            self.backed_up,
            self.cycles,
            self.cycles as f64 / testbench::mac::CORE_HZ,
            self.secs,
            self.frames as f64 / self.secs.max(1e-9),
            self.cycles as f64 / self.secs.max(1e-9) / 1e6
        )?;
        let ovf = self.counters.iter().find(|c| c.0 == "rx_drop_overflow").map_or(0, |c| c.1);
        writeln!(
            f,
            "overflow probe: {} probes sent {} frames past flow control behind a stalled Responder; RX Parse dropped {ovf} of them as overflow",
            self.probes, self.flood_frames
        )?;
        if self.skipped_truncated > 0 {
            writeln!(
                f,
                "left out (--skip-truncated): {} frames whose verdict RX Parse's cut-frame rule decides (shorter than their IP datagram, and passed or dropped for another reason before commit 4cf028e)",
                self.skipped_truncated
            )?;
        }
        writeln!(f, "frames by kind, and the reference's verdict (RX Parse drop reason, or where a good frame goes):")?;
        for (k, s) in &self.kinds {
            let v: Vec<String> = s.fates.iter().map(|(fate, n)| format!("{}: {n}", fate_name(*fate))).collect();
            let short = if s.passed_truncated > 0 {
                format!(" (RX Parse before its cut-frame fix, commit 4cf028e, passed {} of them truncated, {} desynchronising it)", s.passed_truncated, s.desync)
            } else {
                String::new()
            };
            writeln!(f, "  {:<13} {:>9}   {}{short}", format!("{k:?}"), s.frames, v.join(", "))?;
        }
        writeln!(f, "counters:")?;
        for (n, v) in &self.counters {
            writeln!(f, "  {n:<28} {v:>10}")?;
        }
        let join = |m: &BTreeMap<String, u64>| m.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join(", ");
        writeln!(f, "frames sent by the RNIC: {}", join(&self.tx))?;
        writeln!(f, "receive completions: {} ({} successful on UD QPs)", join(&self.cqes), self.ud_receives)?;
        if self.problems.is_empty() {
            writeln!(f, "result: PASS (no hang, no write outside a registered MR, every drop accounted for exactly in every chunk)")
        } else {
            for p in &self.problems {
                writeln!(f, "PROBLEM: {p}")?;
            }
            writeln!(f, "result: FAIL")
        }
    }
}

fn fate_name(f: Fate) -> String {
    const R: [&str; 8] = ["", "not_ip", "not_roce_udp", "not_for_us", "bad_length", "bad_opcode", "bad_tver", "bad_icrc"];
    match f {
        Fate::Vlan => "drop vlan".into(),
        Fate::Dropped(r) => format!("drop {}", R[r as usize]),
        Fate::Completer => "completer".into(),
        Fate::Malformed => "malformed".into(),
        Fate::Lookup => "lookup drop".into(),
        Fate::Responder => "responder".into(),
    }
}

/// One of our QPs as the run keeps it.
struct OurQp {
    qpn: u32,
    peer_qpn: u32,
    rq_base: u64,
    posts: u64,
    /// Receive WQEs posted and not completed, oldest first.
    posted: VecDeque<RecvWqe>,
    ty: QpType,
}

/// The counter window, by name.
struct Counters(Vec<(String, u64)>);

impl Counters {
    fn read(r: &mut Rig) -> Result<Self, String> {
        crate::rxe::rtl_ep::read_counter_window(&mut r.drv).map(Counters).map_err(|e| e.to_string())
    }
    fn get(&self, name: &str) -> u64 {
        crate::rxe::rtl_ep::counter(&self.0, name)
    }
    fn delta(&self, before: &Counters, name: &str) -> u64 {
        self.get(name).wrapping_sub(before.get(name)) & 0xFFFF_FFFF
    }
}

/// What the reference expects of one chunk.
#[derive(Default)]
struct ChunkPrediction {
    /// RX Parse: good frames (0), drops by reason (1..=7), overflow drops (8: none, by flow control; the
    /// overflow probe's flood is counted in 3, not for us, and [`check_chunk`] moves its overflow drops) and
    /// MAC errors (9: none, the fuzz feeds no flagged frames).
    rx: [u64; RX_COUNTERS],
    completer: u64,
    malformed: u64,
    lookup: u64,
    responder: u64,
    /// ARP requests for us, in order, and the other ARP frames (the responder's `arp_ignored`).
    arp_for_us: Vec<Vec<u8>>,
    arp_ignored: u64,
    /// The golden echo replies, in order, and the ICMP frames to us not answered.
    icmp_replies: Vec<Vec<u8>>,
    icmp_ignored: u64,
    /// Frames sent past flow control by the overflow probe (all [`FLOOD_REASON`] by the reference, counted
    /// in `rx[FLOOD_REASON]`).
    flood: u64,
    /// Frames VLAN Strip drops before RX Parse and the responders (`rx_drop_vlan`; the port is on no VLAN, so
    /// a tag of any VID but 0), by the golden port filter.
    vlan_dropped: u64,
}

/// The run's fixed facts.
struct Setup {
    mrs: Mrs,
    peer_ip: u32,
    peer_qpns: Vec<u32>,
    /// Host memory the RNIC may write: the read-write MRs and the CQ rings.
    writable: Vec<(u64, u64)>,
    /// The CQs our QPs complete into: the rig's (its QP), the extra QPs' own.
    cqs: Vec<Cq>,
}

/// Payload FIFO beats RX Parse may write for frame `f`: one per frame beat (the realigned beats and the flush
/// after the last), at most [`RX_FRAME_BEATS`].
pub fn rx_fifo_beats(f: &[u8]) -> u64 {
    (f.len().div_ceil(64) as u64).min(RX_FRAME_BEATS)
}

/// Flow control for one chunk (see the module documentation): what has gone in and what RX Parse is known to
/// have counted, so that a frame goes onto the link only when RX Parse is sure to take it.
struct Credits {
    /// RX Parse's counters when the chunk began.
    base: [u64; RX_COUNTERS],
    /// Frames of the chunk RX Parse is known to have counted.
    counted: u64,
    /// FIFO beats of the frames sent and not yet known counted, oldest first, and their sum.
    open: VecDeque<u64>,
    open_beats: u64,
    /// ARP requests for us sent, ARP replies seen in `System::sent` (scanned up to `sent_seen`).
    arp_asked: usize,
    arp_replies: usize,
    sent_seen: usize,
    held_frames: u64,
    held_cycles: u64,
    /// Frames held back while the link had nothing left to send (RX Parse backed up).
    backed_up: u64,
}

impl Credits {
    fn new(before: &Counters, sent_seen: usize) -> Self {
        let names = crate::rxe::rtl_ep::rx_counter_names();
        Credits {
            base: std::array::from_fn(|i| before.get(&names[i])),
            counted: 0,
            open: VecDeque::new(),
            open_beats: 0,
            arp_asked: 0,
            arp_replies: 0,
            sent_seen,
            held_frames: 0,
            held_cycles: 0,
            backed_up: 0,
        }
    }

    /// Step the system until RX Parse is sure to take `f` (and the ARP responder to answer it, if it asks for
    /// us); Err after [`HANG_CAP`] cycles without room.
    fn wait_for_room(&mut self, r: &mut Rig, f: &[u8]) -> Result<(), String> {
        let arp = arp_request_for_us(f);
        let t0 = r.sys.borrow().cycle;
        let (mut held, mut backed_up) = (false, false);
        loop {
            {
                let s = r.sys.borrow();
                for sf in &s.sent[self.sent_seen..] {
                    self.arp_replies += usize::from(sf.len() >= 14 && sf[12..14] == ETHERTYPE_ARP.to_be_bytes());
                }
                self.sent_seen = s.sent.len();
            }
            let room = |c: &Credits| c.open_beats + RX_JOB_BEATS < RX_FIFO_ROOM && c.open.len() < RX_PEND_ROOM;
            let mut rx_room = room(self);
            if !rx_room {
                self.read_counted(r)?;
                rx_room = room(self);
            }
            let arp_room = !arp || self.arp_asked - self.arp_replies < ARP_FIFO;
            if rx_room && arp_room {
                break;
            }
            held = true;
            // the link has put everything on the wire: the frames not counted are inside the RNIC (or on
            // the wire's last 100 cycles): the RNIC, not the link, holds this frame back
            backed_up |= !rx_room && r.sys.borrow().queued_to_rnic() == 0;
            let now = r.sys.borrow().cycle;
            if now - t0 > HANG_CAP {
                return Err(format!(
                    "a frame waited {HANG_CAP} cycles for room: RX Parse has not counted {} frames ({} FIFO beats) sent before it; {} ARP requests for us without a reply",
                    self.open.len(),
                    self.open_beats,
                    self.arp_asked - self.arp_replies
                ));
            }
            r.sys.borrow_mut().run_until(CREDIT_POLL, |_| false);
        }
        if held {
            self.held_frames += 1;
            self.held_cycles += r.sys.borrow().cycle - t0;
        }
        self.backed_up += u64::from(backed_up);
        Ok(())
    }

    /// Step the system until RX Parse has counted every frame sent (after frames sent past flow control,
    /// whose overflow drops are counted out of order: until then the counters do not say which frames are
    /// out of the FIFO); Err after [`HANG_CAP`] cycles.
    fn drain(&mut self, r: &mut Rig) -> Result<(), String> {
        let t0 = r.sys.borrow().cycle;
        while !self.open.is_empty() {
            if r.sys.borrow().cycle - t0 > HANG_CAP {
                return Err(format!("RX Parse did not count {} frames within {HANG_CAP} cycles", self.open.len()));
            }
            r.sys.borrow_mut().run_until(CREDIT_POLL, |_| false);
            self.read_counted(r)?;
        }
        Ok(())
    }

    /// `f` went onto the link.
    fn sent(&mut self, f: &[u8]) {
        let b = rx_fifo_beats(f);
        self.open.push_back(b);
        self.open_beats += b;
        self.arp_asked += usize::from(arp_request_for_us(f));
    }

    /// Read RX Parse's counters (over the register bus, the system stepping) and close the frames they count:
    /// RX Parse counts frames in the order they came, so the sum counts the oldest open ones.
    fn read_counted(&mut self, r: &mut Rig) -> Result<(), String> {
        let mut counted = 0u64;
        for (b, i) in self.base.iter().zip(crate::rxe::rtl_ep::rx_counter_slots()) {
            let v = r.drv.bus().read32(REG_COUNTERS + 4 * i).map_err(|e| format!("reading RX Parse's counter in slot {i}: {e}"))?;
            counted += u64::from(v).wrapping_sub(*b) & 0xFFFF_FFFF;
        }
        if counted < self.counted || counted - self.counted > self.open.len() as u64 {
            return Err(format!(
                "RX Parse counts {counted} frames of the chunk, but {} were counted before and {} sent since",
                self.counted,
                self.open.len()
            ));
        }
        for _ in self.counted..counted {
            self.open_beats -= self.open.pop_front().unwrap();
        }
        self.counted = counted;
        Ok(())
    }
}

/// Run the fuzz (see the module documentation); `progress(frames_done)` after every chunk.
pub fn run(o: &FuzzOpts, progress: &mut dyn FnMut(u64)) -> anyhow::Result<FuzzReport> {
    anyhow::ensure!(o.chunk > 0, "chunk must be at least one frame");
    let t0 = Instant::now();
    let mut r = rig(1024, &o.dir);
    r.sys.borrow_mut().detached = true;
    let mut rng = SmallRng::seed_from_u64(o.seed);
    let (peer_mac, peer_ip) = {
        let av = r.sys.borrow().peer.av_to_me();
        let std::net::IpAddr::V4(ip) = av.dip else { anyhow::bail!("the peer has no IPv4 address") };
        (av.dmac, u32::from(ip))
    };
    // host memory: the rig's MR, CQ and first QP's rings come first; then the fuzz buffer (canary, MR, canary)
    let rig_regions: Vec<(u64, usize)> = r.mem.lock().unwrap().regions().iter().map(|(b, v)| (*b, v.len())).collect();
    anyhow::ensure!(
        rig_regions.len() == 4 && rig_regions[0].0 == r.src && rig_regions[1].1 == 64 * rnic_driver::host::CQE_BYTES && rig_regions[3].1 == RQ_DEPTH * WQE_BYTES,
        "unexpected rig host memory layout {rig_regions:x?} (src, CQ ring, SQ ring, RQ ring expected)"
    );
    let cq_ring = (rig_regions[1].0, rig_regions[1].1 as u64);
    // the extra QPs complete into a CQ of their own, large enough for every receive they may have posted
    // (16 each), so that it never overruns between two drains
    let before = r.mem.lock().unwrap().regions().len();
    let big_cq = r.drv.create_cq(BIG_CQ).map_err(|e| anyhow::anyhow!("create_cq: {e}"))?;
    let big_ring = {
        let m = r.mem.lock().unwrap();
        let regions = m.regions();
        anyhow::ensure!(regions.len() == before + 1, "unexpected CQ ring allocation");
        (regions[before].0, regions[before].1.len() as u64)
    };
    let mut qps = vec![OurQp { qpn: r.qpn, peer_qpn: r.peer_qpn, rq_base: rig_regions[3].0, posts: 0, posted: VecDeque::new(), ty: QpType::Rc }];
    for k in 0..EXTRA_QPS + UC_QPS + UD_QPS {
        let before = r.mem.lock().unwrap().regions().len();
        let cap = QpCap { max_send_wr: 64, max_recv_wr: 16, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
        let ty = if k >= EXTRA_QPS + UC_QPS {
            QpType::Ud
        } else if k >= EXTRA_QPS {
            QpType::Uc
        } else {
            QpType::Rc
        };
        let (qpn, peer_qpn) = r.add_qp_pair_of(ty, 1024, 0x100 * k as u32, 0x200 * k as u32, cap, big_cq);
        let regions: Vec<(u64, usize)> = r.mem.lock().unwrap().regions().iter().map(|(b, v)| (*b, v.len())).collect();
        anyhow::ensure!(regions.len() == before + 2 && regions[before + 1].1 == RQ_DEPTH * WQE_BYTES, "unexpected ring allocation");
        qps.push(OurQp { qpn, peer_qpn, rq_base: regions[before + 1].0, posts: 0, posted: VecDeque::new(), ty });
    }
    let buf = r.mem.lock().unwrap().alloc((2 * CANARY + MR_LEN) as usize);
    {
        let canary: Vec<u8> = (0..2 * CANARY + MR_LEN).map(|_| rng.gen()).collect();
        r.mem.lock().unwrap().write(buf, &canary).unwrap();
    }
    let x_base = buf + CANARY;
    let x_key = r.drv.reg_mr(Pd(1), x_base, MR_LEN, AccessFlags::ALL).map_err(|e| anyhow::anyhow!("reg_mr: {e}"))?;
    let ro_key = r.drv.reg_mr(Pd(1), buf + RO_OFF, RO_LEN, AccessFlags::REMOTE_READ).map_err(|e| anyhow::anyhow!("reg_mr: {e}"))?;
    let setup = Setup {
        mrs: Mrs { x_base, x_key, ro_base: buf + RO_OFF, ro_key, src_base: r.src, src_key: r.lkey, buf },
        peer_ip,
        peer_qpns: qps.iter().map(|q| q.peer_qpn).collect(),
        writable: vec![(x_base, MR_LEN), (r.src, 2 << 20), cq_ring, big_ring],
        cqs: vec![Cq(0), big_cq],
    };
    let mut gen = Gen {
        rng: SmallRng::seed_from_u64(o.seed ^ 0x5EED_F022),
        qps: qps.iter().map(|q| QpGen { qpn: q.qpn, mtu: 1024, epsn: 0, sq_psn: 0, msg: None, clean: q.qpn != r.qpn && q.qpn % 2 == 0, uc: q.ty == QpType::Uc, ud: q.ty == QpType::Ud }).collect(),
        mrs: setup.mrs,
        peer_mac,
        peer_ip,
    };
    let mut shadow = r.mem.lock().unwrap().clone();
    let mut rep = FuzzReport { seed: o.seed, ..Default::default() };
    let live: Vec<(u32, QpType)> = qps.iter().map(|q| (q.qpn, q.ty)).collect();
    let mut wr_id = 0u64;
    let mut done = 0u64;
    let mut before = Counters::read(&mut r).map_err(anyhow::Error::msg)?;
    let mut chunk = 0u64;
    while done < o.frames {
        let n = (o.frames - done).min(o.chunk as u64) as usize;
        // ---- bring every QP back and top its receive queue up
        for (i, q) in qps.iter_mut().enumerate() {
            let g = &mut gen.qps[i];
            g.mtu = 256 << rng.gen_range(0..5);
            g.epsn = rng.gen_range(0..1 << 24);
            g.sq_psn = rng.gen_range(0..1 << 24);
            g.msg = None;
            let access = if g.clean || rng.gen_bool(0.85) {
                AccessFlags::ALL
            } else {
                AccessFlags(AccessFlags::LOCAL_WRITE.0 | rng.gen_range(0..16u32) & (AccessFlags::REMOTE_WRITE.0 | AccessFlags::REMOTE_READ.0 | AccessFlags::REMOTE_ATOMIC.0))
            };
            let av = r.sys.borrow().peer.av_to_me();
            let mut attrs = crate::pair::rc_rts_attrs(g.mtu, q.peer_qpn, av, g.sq_psn, g.epsn).to_vec();
            attrs[0].qp_access_flags = Some(access);
            // (a UD QP: its Q_Key; the destination the RC attributes name is not looked at)
            attrs[0].qkey = Some(UD_QKEY);
            attrs.insert(0, QpAttr { qp_state: Some(QpState::Reset), ..Default::default() });
            for a in &attrs {
                r.drv.modify_qp(q.qpn, a).map_err(|e| anyhow::anyhow!("chunk {chunk}: modify_qp {:#x}: {e}", q.qpn))?;
            }
            while q.posted.len() < RQ_DEPTH {
                wr_id += 1;
                let w = gen.recv_wqe(wr_id, gen.qps[i].clean);
                r.drv
                    .post_recv(q.qpn, &RecvWr { wr_id, sg_list: vec![Sge { addr: w.addr, length: w.length, lkey: w.lkey }] })
                    .map_err(|e| anyhow::anyhow!("chunk {chunk}: post_recv: {e}"))?;
                let slot = q.rq_base + (q.posts % RQ_DEPTH as u64) * WQE_BYTES as u64;
                shadow.write(slot, &w.encode()).unwrap();
                q.posts += 1;
                q.posted.push_back(w);
            }
        }
        // ---- the frames and their reference verdicts, in at the link rate (frames queue at the MAC) or paced:
        // each frame once the RNIC has been quiet for a few cycles after the one before, so that RX Parse never
        // overflows and every identity holds exactly; a paced chunk learns the responder's ePSN from the
        // RNIC's ACKs and NAKs as it goes
        let paced = rng.gen_bool(PACED);
        let mut pred = ChunkPrediction::default();
        let mut frames = Vec::with_capacity(n);
        let mut seen_sent = r.sys.borrow().sent.len();
        let mut credits = Credits::new(&before, seen_sent);
        let mut no_room = None;
        // the overflow probe's frames go first (the chunk's QPs were just brought back)
        let probe_here = !paced && chunk % PROBE_EVERY == 1 && n >= 2 * (PROBE_FLOOD + PROBE_WAITING + 1);
        let mut probe: VecDeque<(Kind, Vec<u8>)> = if probe_here { gen.stall_and_flood().into() } else { VecDeque::new() };
        for _ in 0..n {
            // each frame as RX Parse and the responders see it: through VLAN Strip (the golden port filter, the
            // port on no VLAN), or dropped there
            let (kind, f, seen) = match probe.pop_front() {
                Some((kind, f)) => {
                    let seen = port_vlan_view(&f, None).map(|x| (predict_rx(&x, OUR_IP), x));
                    (kind, f, seen)
                }
                None => loop {
                    let kind = gen.kind();
                    let f = gen.frame(kind);
                    let seen = port_vlan_view(&f, None).map(|x| (predict_rx(&x, OUR_IP), x));
                    if !(o.skip_truncated && seen.as_ref().is_some_and(|(v, _)| v.reason != v.before_fix)) {
                        break (kind, f, seen);
                    }
                    rep.skipped_truncated += 1;
                },
            };
            let Some((v, seen)) = seen else {
                // dropped by VLAN Strip: it takes nothing of RX Parse's room and reaches no responder
                pred.vlan_dropped += 1;
                let ks = rep.kinds.entry(kind).or_default();
                ks.frames += 1;
                *ks.fates.entry(Fate::Vlan).or_default() += 1;
                r.sys.borrow_mut().inject(f.clone());
                frames.push(f);
                continue;
            };
            // onto the link only when RX Parse is sure to take it (no overflow drop: exact accounting); the
            // probe's flood goes past flow control, then every frame sent must be counted before the next
            if kind == Kind::Flood {
                assert_eq!(v.reason as usize, FLOOD_REASON, "a flood frame RX Parse would not drop as not for us");
                pred.flood += 1;
            } else if let Err(e) = credits.wait_for_room(&mut r, &seen) {
                no_room = Some(e);
                break;
            }
            credits.sent(&seen);
            let fate = responder_fate(&v, &live, peer_ip);
            let ks = rep.kinds.entry(kind).or_default();
            ks.frames += 1;
            *ks.fates.entry(fate).or_default() += 1;
            ks.passed_truncated += u64::from(v.truncated && v.before_fix == 0);
            ks.desync += u64::from(v.desync);
            pred.rx[v.reason as usize] += 1;
            match fate {
                Fate::Completer => pred.completer += 1,
                Fate::Malformed => pred.malformed += 1,
                Fate::Lookup => pred.lookup += 1,
                Fate::Responder => pred.responder += 1,
                Fate::Dropped(_) | Fate::Vlan => {}
            }
            if arp_request_for_us(&seen) {
                pred.arp_for_us.push(seen.clone());
            } else {
                pred.arp_ignored += u64::from(arp_frame(&seen));
            }
            match icmp_echo_reply(&seen, MacAddr(OUR_MAC), Ipv4Addr::from(OUR_IP)) {
                Some(reply) => pred.icmp_replies.push(reply),
                None => pred.icmp_ignored += u64::from(icmp_to_us(&seen)),
            }
            r.sys.borrow_mut().inject(f.clone());
            frames.push(f);
            if kind == Kind::Flood && probe.is_empty() {
                if let Err(e) = credits.drain(&mut r) {
                    no_room = Some(e);
                    break;
                }
            }
            let mut s = r.sys.borrow_mut();
            if paced {
                let gap = rng.gen_range(8..64);
                if !s.run_until(HANG_CAP, |s| s.cycle - s.last_activity > gap) {
                    break;
                }
                for sf in &s.sent[seen_sent..] {
                    if let Ok(Frame::Roce(rf)) = parse_ethernet(sf) {
                        if let Some(q) = qps.iter().position(|q| q.peer_qpn == rf.packet.bth.dest_qpn) {
                            gen.resync(q, &rf);
                        }
                    }
                }
                seen_sent = s.sent.len();
            }
        }
        let n = frames.len();
        let first = done;
        rep.held_frames += credits.held_frames;
        rep.held_cycles += credits.held_cycles;
        rep.backed_up += credits.backed_up;
        rep.probes += u64::from(pred.flood > 0);
        rep.flood_frames += pred.flood;
        let quiet = r.sys.borrow_mut().run_until(HANG_CAP, |s| s.cycle - s.last_activity > QUIET);
        let tag = format!("seed {} chunk {chunk} (frames {first}..{})", o.seed, first + n as u64);
        if let Some(e) = no_room {
            rep.problems.push(format!("{tag}: {e}"));
            break;
        }
        if !quiet {
            rep.problems.push(format!("{tag}: the RNIC did not go quiet within {HANG_CAP} cycles of the last frame"));
            break;
        }
        // ---- everything accounted for (a quiet RNIC with frames inside it is hung)
        let mut after = Counters::read(&mut r).map_err(anyhow::Error::msg)?;
        let rx_names = crate::rxe::rtl_ep::rx_counter_names();
        let sum = |c: &Counters, b: &Counters| rx_names.iter().map(|x| c.delta(b, x)).sum::<u64>() + c.delta(b, "rx_drop_vlan");
        if sum(&after, &before) != n as u64 {
            r.sys.borrow_mut().run_until(200_000, |_| false);
            after = Counters::read(&mut r).map_err(anyhow::Error::msg)?;
        }
        // ---- completions, frames sent, identities
        let mut problems = Vec::new();
        drain_cq(&mut r, &mut qps, &setup, &mut rep, &mut problems);
        let sent = std::mem::take(&mut r.sys.borrow_mut().sent);
        // the system keeps every frame it delivered: not needed here (the pcap has them)
        r.sys.borrow_mut().received.clear();
        let exact = check_chunk(n as u64, &pred, &before, &after, &sent, &setup, &mut rep, &mut problems);
        check_memory(&r, &shadow, &setup.writable, &mut problems);
        {
            let s = r.sys.borrow();
            if !s.dma.faults.is_empty() {
                problems.push(format!("DMA faults: {:?}", s.dma.faults));
            }
            if s.out.underruns != 0 {
                problems.push(format!("the MAC's TX stream paused inside a frame {} times", s.out.underruns));
            }
        }
        rep.chunks += 1;
        rep.exact_chunks += u64::from(exact);
        done += n as u64;
        chunk += 1;
        before = after;
        progress(done);
        if !problems.is_empty() {
            rep.problems.extend(problems.into_iter().map(|p| format!("{tag}, {}: {p}", if paced { "paced" } else { "link rate" })));
            // suspects: the frames RX Parse's cut-frame rule decides (a regression of commit 4cf028e shows here)
            let sus = |i: usize, desync: bool| {
                port_vlan_view(&frames[i], None).is_some_and(|x| {
                    let v = predict_rx(&x, OUR_IP);
                    v.reason != v.before_fix && (v.desync == desync)
                })
            };
            for (what, desync) in [
                ("more payload beats than it wrote for them (desync)", true),
                ("a verdict other than bad length though they are shorter than 14 + IP total length", false),
            ] {
                let ks: Vec<usize> = (0..n).filter(|&i| sus(i, desync)).collect();
                if let Some(&k) = ks.first() {
                    rep.problems.push(format!(
                        "{tag}: suspects, should the cut-frame rule have regressed: {} frames RX Parse passed before its fix with {what}, at {:?}{} (frame index = rnic-rx.pcap record); the first, {} bytes: {}",
                        ks.len(),
                        ks.iter().take(8).map(|i| first + *i as u64).collect::<Vec<_>>(),
                        if ks.len() > 8 { " ..." } else { "" },
                        frames[k].len(),
                        hex(&frames[k])
                    ));
                }
            }
            break;
        }
    }
    rep.frames = done;
    // ---- the NIC is alive: a golden-peer RDMA WRITE and READ on the rig's QP, brought back (also after a
    // failed chunk: the report then says whether the RNIC still works)
    if let Err(e) = alive(&mut r, &setup, &mut rng) {
        rep.problems.push(format!("seed {}: after the fuzz: {e}", o.seed));
    }
    let mut problems = Vec::new();
    check_memory(&r, &shadow, &setup.writable, &mut problems);
    if !r.sys.borrow().dma.faults.is_empty() {
        problems.push(format!("DMA faults: {:?}", r.sys.borrow().dma.faults));
    }
    rep.problems.extend(problems.into_iter().map(|p| format!("seed {}: after the fuzz: {p}", o.seed)));
    let fin = Counters::read(&mut r).map_err(anyhow::Error::msg)?;
    rep.counters = fin.0;
    rep.cycles = r.sys.borrow().cycle;
    rep.secs = t0.elapsed().as_secs_f64();
    Ok(rep)
}

/// Poll the CQ dry: every completion must be of a QP of ours, for its oldest posted receive WQE (in order),
/// with a known status; a successful one must fit its WQE and, when data landed, land in a registered,
/// locally writable MR that the WQE's lkey names.
fn drain_cq(r: &mut Rig, qps: &mut [OurQp], s: &Setup, rep: &mut FuzzReport, problems: &mut Vec<String>) {
    loop {
        let Some(wcs) = s.cqs.iter().find_map(|&cq| match r.drv.poll_cq(cq, 64) {
            Ok(w) if w.is_empty() => None,
            other => Some(other),
        }) else {
            return;
        };
        let wcs = match wcs {
            Ok(w) => w,
            Err(e) => {
                problems.push(format!("poll_cq: {e}"));
                return;
            }
        };
        if wcs.is_empty() {
            return;
        }
        for wc in wcs {
            *rep.cqes.entry(format!("{:?}/{:?}", wc.opcode, wc.status)).or_default() += 1;
            let Some(q) = qps.iter_mut().find(|q| q.qpn == wc.qp_num) else {
                problems.push(format!("completion for a QP that is not ours: {wc:?}"));
                continue;
            };
            let Some(p) = q.posted.pop_front() else {
                problems.push(format!("completion with no receive posted: {wc:?}"));
                continue;
            };
            if p.wr_id != wc.wr_id {
                problems.push(format!("completion out of order: {wc:?}, oldest posted {p:?}"));
            }
            if !matches!(wc.opcode, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm) {
                problems.push(format!("a receive completion with a send opcode: {wc:?}"));
            }
            rep.ud_receives += u64::from(q.ty == QpType::Ud && wc.status == WcStatus::Success);
            if q.ty == QpType::Ud && wc.status == WcStatus::Success && (wc.byte_len < 40 || !wc.wc_flags.has(WcFlags::GRH)) {
                problems.push(format!("a UD receive without its 40-byte GRH area: {wc:?}"));
            }
            if wc.status == WcStatus::Success && wc.opcode == WcOpcode::Recv && wc.byte_len > 0 {
                let (a, l) = (p.addr, u64::from(wc.byte_len));
                let in_x = p.lkey == s.mrs.x_key && a >= s.mrs.x_base && a + l <= s.mrs.x_base + MR_LEN;
                let in_src = p.lkey == s.mrs.src_key && a >= s.mrs.src_base && a + l <= s.mrs.src_base + (2 << 20);
                if wc.byte_len > p.length || !(in_x || in_src) {
                    problems.push(format!("a receive succeeded outside its buffer or MR: {wc:?} for {p:?}"));
                }
            }
        }
    }
}

/// Every byte outside the writable ranges equals the shadow.
fn check_memory(r: &Rig, shadow: &HostMemory, writable: &[(u64, u64)], problems: &mut Vec<String>) {
    let mem = r.mem.lock().unwrap();
    let (a, b) = (shadow.regions(), mem.regions());
    if a.len() != b.len() {
        problems.push(format!("host allocations changed: {} before, {} now", a.len(), b.len()));
        return;
    }
    for ((base, x), (_, y)) in a.iter().zip(&b) {
        if x == y {
            continue;
        }
        for (i, (p, q)) in x.iter().zip(y.iter()).enumerate() {
            let at = base + i as u64;
            if p != q && !writable.iter().any(|&(w, l)| at >= w && at < w + l) {
                problems.push(format!(
                    "host memory outside every writable MR and the CQ ring changed at {at:#x} (allocation {base:#x} + {i:#x}): {p:#04x} -> {q:#04x}"
                ));
                return;
            }
        }
    }
}

/// The identities of one chunk (`d`: counter deltas; `p`: the reference's prediction for its `n` frames),
/// the same in every chunk (flow control leaves RX Parse no overflow drop but the overflow probe's, see the
/// module documentation); true when they all held:
///
/// 1. RX Parse counts every frame exactly once: `rx_good_frames + Σ rx_drop_* = n` (else frames are stuck
///    inside: a hang), and each of its ten counters equals the reference's count (`rx_drop_mac_error` 0: no frame
///    is flagged), `rx_drop_overflow` 0,
///    or in a chunk with the overflow probe at most its flood, whose frames the reference counts as not for
///    us, so `rx_drop_not_for_us` is the reference's count minus `rx_drop_overflow`. (An ARP frame is
///    counted by RX Parse like any other: ethertype 0x0806 is `rx_drop_not_ip`; the ARP responder watches
///    the same stream beside it and counts its answers apart, in `arp_answered`.)
/// 2. The top hands every good frame to exactly one of the Completer (opcodes 0x0D..=0x12) and the Responder,
///    and the Responder's `Look` state counts every header it takes exactly once, in one of
///    `resp_drop_malformed`, `resp_drop_qp_lookup`, `resp_drop_qp_error` and `resp_requests`: `malformed`,
///    `lookup` and `requests + qp_error` equal the reference's counts, and `rx_good_frames` minus those the
///    frames the reference sends to the Completer (the Completer's counters are not in the window).
///    (`qp_error` alone is not predicted: whether a QP is in error when a request comes depends on the
///    Responder's verdicts on the requests before it, which the reference does not model.)
/// 3. Of the requests past the lookup, each ends at most once as a duplicate, a PSN-sequence NAK, an
///    out-of-sequence drop, an RNR NAK or a class-C NAK: `resp_requests >= Σ those`; a duplicate without a
///    resource is a duplicate: `resp_drop_dup_no_resource <= resp_duplicates`. (Which end a request meets
///    depends on PSN and resource state the reference does not model either; a request may also end in none
///    of them, as an executed one.)
/// 4. Every frame the RNIC sent is a good RoCEv2 frame (ICRC included) to the peer or an ARP reply, and they
///    match the counters one for one: ACKNOWLEDGE with an ACK syndrome = `resp_acks`, NAK PSN sequence error =
///    `resp_nak_psn_seq`, RNR NAK = `resp_rnr_naks`, NAK invalid request / remote access / remote operational
///    = `resp_class_c_naks`, READ RESPONSE = `resp_read_responses`, ARP replies = `arp_answered` = the
///    chunk's ARP requests for our IP, reply k the golden reply to request k (flow control keeps the ARP
///    responder's reply FIFO from filling: `arp_dropped` stays 0), and `arp_ignored` = the chunk's other ARP
///    frames, untagged or with one 802.1Q tag. Every frame is seen as VLAN Strip passes it (the golden port
///    filter, the port on no VLAN: a priority tag removed); the frames it drops are `rx_drop_vlan`, and with
///    RX Parse's counters they account for every frame in.
#[allow(clippy::too_many_arguments)]
fn check_chunk(
    n: u64,
    p: &ChunkPrediction,
    before: &Counters,
    after: &Counters,
    sent: &[Vec<u8>],
    s: &Setup,
    rep: &mut FuzzReport,
    problems: &mut Vec<String>,
) -> bool {
    let had = problems.len();
    let d = |name: &str| after.delta(before, name);
    let names = crate::rxe::rtl_ep::rx_counter_names();
    let rx: Vec<u64> = names.iter().map(|x| d(x)).collect();
    let total: u64 = rx.iter().sum::<u64>() + d("rx_drop_vlan");
    if total != n {
        problems.push(format!(
            "{n} frames in, VLAN Strip and RX Parse account for {total} (hang: frames stuck inside): counters {:?} and {} VLAN drops, reference {:?} and {}",
            rx,
            d("rx_drop_vlan"),
            p.rx,
            p.vlan_dropped
        ));
        return false;
    }
    let cmp = |what: &str, got: u64, want: u64, problems: &mut Vec<String>| {
        if got != want {
            problems.push(format!("{what}: counted {got}, the reference says {want}"));
        }
    };
    // the CQs have room for every receive posted: a completion not written (CQ overrun) is a fault
    cmp("cq_overruns", d("cq_overruns"), 0, problems);
    cmp("rx_drop_vlan", d("rx_drop_vlan"), p.vlan_dropped, problems);
    // only the overflow probe's flood may find no room, and every flood frame is not for us
    let mut want = p.rx;
    if rx[8] > p.flood {
        problems.push(format!("{} overflow drops, but only {} frames went in past flow control", rx[8], p.flood));
    } else {
        want[FLOOD_REASON] -= rx[8];
        want[8] = rx[8];
    }
    for i in 0..RX_COUNTERS {
        cmp(&names[i], rx[i], want[i], problems);
    }
    cmp("resp_drop_malformed", d("resp_drop_malformed"), p.malformed, problems);
    cmp("resp_drop_qp_lookup", d("resp_drop_qp_lookup"), p.lookup, problems);
    cmp("resp_requests + resp_drop_qp_error", d("resp_requests") + d("resp_drop_qp_error"), p.responder, problems);
    let to_resp = d("resp_drop_malformed") + d("resp_drop_qp_lookup") + d("resp_requests") + d("resp_drop_qp_error");
    if to_resp > rx[0] || rx[0] - to_resp != p.completer {
        problems.push(format!(
            "{} good frames, {to_resp} taken by the Responder: {} left for the Completer, the reference sends it {}",
            rx[0],
            rx[0] as i64 - to_resp as i64,
            p.completer
        ));
    }
    let outcomes = ["resp_duplicates", "resp_nak_psn_seq", "resp_drop_out_of_seq", "resp_rnr_naks", "resp_class_c_naks", "resp_drop_uc"];
    let ends: u64 = outcomes.iter().map(|x| d(x)).sum();
    if ends > d("resp_requests") {
        problems.push(format!("{} requests, but {ends} ended as {outcomes:?}", d("resp_requests")));
    }
    if d("resp_drop_dup_no_resource") > d("resp_duplicates") {
        problems.push("more duplicates without a resource than duplicates".into());
    }
    // frames sent
    let mut tx: BTreeMap<&str, u64> = BTreeMap::new();
    let mut arp_next = 0usize;
    let mut icmp_next = 0usize;
    for (k, f) in sent.iter().enumerate() {
        match parse_ethernet(f) {
            Ok(Frame::Roce(rf)) => {
                if !rf.icrc_ok() {
                    problems.push(format!("sent frame {k} has a bad ICRC: {}", hex(f)));
                }
                let dst_ok = rf.ip.dst() == std::net::IpAddr::V4(s.peer_ip.into()) && s.peer_qpns.contains(&rf.packet.bth.dest_qpn);
                if !dst_ok {
                    problems.push(format!("sent frame {k} is not addressed to a peer QP: {}", hex(f)));
                }
                let op = rf.packet.bth.opcode;
                let key = match (op, rf.packet.aeth().map(|a| a.kind())) {
                    (RC_ACKNOWLEDGE, Some(AethKind::Ack { .. })) => "resp_acks",
                    (RC_ACKNOWLEDGE, Some(AethKind::Nak(NakCode::PsnSequenceError))) => "resp_nak_psn_seq",
                    (RC_ACKNOWLEDGE, Some(AethKind::RnrNak { .. })) => "resp_rnr_naks",
                    (
                        RC_ACKNOWLEDGE,
                        Some(AethKind::Nak(NakCode::InvalidRequest | NakCode::RemoteAccessError | NakCode::RemoteOperationalError)),
                    ) => "resp_class_c_naks",
                    (RC_RDMA_READ_RESPONSE_FIRST..=RC_RDMA_READ_RESPONSE_ONLY, _) => "resp_read_responses",
                    // an atomic the Atomic Unit executed (or answered again from its saved value)
                    (RC_ATOMIC_ACKNOWLEDGE, Some(AethKind::Ack { .. })) => "atomic_acks",
                    _ => {
                        problems.push(format!("sent frame {k}: unexpected opcode {op:#04x} / AETH: {}", hex(f)));
                        "other"
                    }
                };
                *tx.entry(key).or_default() += 1;
            }
            Ok(Frame::Arp(a)) => {
                *tx.entry("arp_answered").or_default() += 1;
                // the golden reply to the next request for us: every one is answered, in order
                let want = p.arp_for_us.get(arp_next).map(|req| {
                    let mut w = ArpFrame::parse(req).map(|q| q.reply_from(MacAddr(OUR_MAC)).build()).unwrap_or_default();
                    w.resize(60, 0);
                    w
                });
                if want.as_ref() != Some(f) || a.arp.oper != testbench::wire::frame::ARP_OP_REPLY {
                    problems.push(format!(
                        "ARP reply {k} is not the golden reply to the chunk's request for us number {arp_next} (of {}): {}",
                        p.arp_for_us.len(),
                        hex(f)
                    ));
                }
                arp_next += 1;
            }
            _ if f.len() > 23 && f[12..14] == ETHERTYPE_IPV4.to_be_bytes() && f[23] == IP_PROTO_ICMP => {
                // the golden reply to the next echo request: every one is answered, in order
                if p.icmp_replies.get(icmp_next) != Some(f) {
                    problems.push(format!(
                        "ICMP frame {k} is not the golden reply to the chunk's echo request number {icmp_next} (of {}): {}",
                        p.icmp_replies.len(),
                        hex(f)
                    ));
                }
                icmp_next += 1;
            }
            _ => problems.push(format!("sent frame {k} is neither RoCEv2, ARP nor ICMP: {}", hex(f))),
        }
    }
    for key in ["resp_acks", "resp_nak_psn_seq", "resp_rnr_naks", "resp_class_c_naks", "resp_read_responses", "arp_answered"] {
        let got = tx.get(key).copied().unwrap_or(0);
        if got != d(key) {
            problems.push(format!("{got} frames of {key} sent, the counter moved by {}", d(key)));
        }
        *rep.tx.entry(key.to_string()).or_default() += got;
    }
    cmp("arp_answered", d("arp_answered"), p.arp_for_us.len() as u64, problems);
    cmp("arp_ignored", d("arp_ignored"), p.arp_ignored, problems);
    cmp("arp_dropped", d("arp_dropped"), 0, problems);
    cmp("icmp_echo_replies", d("icmp_echo_replies"), p.icmp_replies.len() as u64, problems);
    cmp("ICMP replies sent", icmp_next as u64, p.icmp_replies.len() as u64, problems);
    cmp("icmp_ignored", d("icmp_ignored"), p.icmp_ignored, problems);
    cmp("icmp_overflow", d("icmp_overflow"), 0, problems);
    *rep.tx.entry("icmp_echo_replies".to_string()).or_default() += icmp_next as u64;
    *rep.tx.entry("atomic_acks".to_string()).or_default() += tx.get("atomic_acks").copied().unwrap_or(0);
    problems.len() == had
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// After the fuzz: the rig's QP brought back and attached to the golden peer again; the peer RDMA WRITEs into
/// the fuzz MR and READs it back: both complete without error and the bytes are right (the NIC is alive).
fn alive(r: &mut Rig, s: &Setup, rng: &mut SmallRng) -> Result<(), String> {
    let ok = r.sys.borrow_mut().run_until(HANG_CAP, |s| s.cycle - s.last_activity > QUIET);
    if !ok {
        return Err("not quiet".into());
    }
    let (peer_sq_psn, peer_rq_psn, av) = {
        let sys = r.sys.borrow();
        let q = sys.peer.qp(r.peer_qpn).ok_or("the peer's QP is gone")?;
        (q.req.psn, q.resp.psn, sys.peer.av_to_me())
    };
    r.drv.modify_qp(r.qpn, &QpAttr { qp_state: Some(QpState::Reset), ..Default::default() }).map_err(|e| e.to_string())?;
    for a in crate::pair::rc_rts_attrs(1024, r.peer_qpn, av, peer_rq_psn, peer_sq_psn) {
        r.drv.modify_qp(r.qpn, &a).map_err(|e| e.to_string())?;
    }
    r.sys.borrow_mut().sent.clear();
    r.sys.borrow_mut().detached = false;
    let data: Vec<u8> = (0..3000).map(|_| rng.gen()).collect();
    let (off_w, off_r) = (rng.gen_range(0..MR_LEN - 8192), rng.gen_range(0..MR_LEN - 8192));
    let want_r = r.mem.lock().unwrap().read(s.mrs.x_base + off_r, 2000).unwrap();
    {
        let mut sys = r.sys.borrow_mut();
        sys.peer.mem_mut().write(r.peer_buf, &data).unwrap();
        let mut w = SendWr::new(71, WrOpcode::RdmaWrite, vec![Sge { addr: r.peer_buf, length: 3000, lkey: r.peer_rkey }]);
        w.remote_addr = s.mrs.x_base + off_w;
        w.rkey = s.mrs.x_key;
        w.flags.signaled = true;
        sys.peer.post_send(r.peer_qpn, w).map_err(|e| e.to_string())?;
        let mut rd = SendWr::new(72, WrOpcode::RdmaRead, vec![Sge { addr: r.peer_buf + 8192, length: 2000, lkey: r.peer_rkey }]);
        rd.remote_addr = s.mrs.x_base + off_r;
        rd.rkey = s.mrs.x_key;
        rd.flags.signaled = true;
        sys.peer.post_send(r.peer_qpn, rd).map_err(|e| e.to_string())?;
    }
    let wcs = r.wait_peer_completions(2, 2_000_000);
    let ids: Vec<(u64, WcStatus)> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    if ids != [(71, WcStatus::Success), (72, WcStatus::Success)] {
        return Err(format!("the golden peer's RDMA WRITE and READ completed as {ids:?}"));
    }
    if r.mem.lock().unwrap().read(s.mrs.x_base + off_w, 3000).unwrap() != data {
        return Err("the peer's RDMA WRITE did not land".into());
    }
    if r.sys.borrow().peer.mem().read(r.peer_buf + 8192, 2000).unwrap() != want_r {
        return Err("the peer's RDMA READ brought back other bytes".into());
    }
    Ok(())
}
