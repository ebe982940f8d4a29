//! The host interface: register map, command words, WQE and CQE formats, DMA port rules.
//!
//! One source of truth: `docs/host-interface.md` describes these constants and layouts, the RTL's `Constant<>`
//! fields take their values from here, and the driver encodes and decodes with these functions. Everything in
//! host memory is little-endian except the fields that are copied to or from the wire as they stand (immediate
//! data, which is kept in wire byte order exactly as `ibv_send_wr.imm_data` is a `__be32`).

use crate::verbs::{WcFlags, WcOpcode, WcStatus, WrOpcode};

// ---------------------------------------------------------------------------------------------------------
// Register map (byte addresses in a 1 MiB BAR; every register is 32 bits, AXI4-Lite shaped, 32-bit aligned).
// ---------------------------------------------------------------------------------------------------------

/// Width of the register slave's byte address.
pub const CSR_ADDR_BITS: usize = 20;
/// `ID`: reads "RNIC".
pub const REG_ID: u32 = 0x0_0000;
pub const ID_VALUE: u32 = 0x524E_4943;
/// `VERSION`: major in 31:16, minor in 15:0.
pub const REG_VERSION: u32 = 0x0_0004;
pub const VERSION_VALUE: u32 = 0x0001_0000;
/// `CAPS`: the capability bits below.
pub const REG_CAPS: u32 = 0x0_0008;
/// `SIZES`: log2 QPs in 7:0, log2 MR entries in 15:8, log2 CQs in 23:16, largest path MTU enum in 31:24.
pub const REG_SIZES: u32 = 0x0_000C;
/// `MAC_LO`: MAC bytes 2..5 (byte 5 in bits 7:0). `MAC_HI`: bytes 0..1 in 15:0. `IPV4`: our address.
pub const REG_MAC_LO: u32 = 0x0_0010;
pub const REG_MAC_HI: u32 = 0x0_0014;
pub const REG_IPV4: u32 = 0x0_0018;
/// ARP resolution (the RNIC asks the wire for a neighbour's MAC): write an IPv4 address (as `IPV4`) to send
/// a broadcast ARP request for it; `ARP_MAC_LO`/`ARP_MAC_HI` then show the MAC of the first ARP request or
/// reply from that address (laid out as `MAC_LO`/`MAC_HI`), `ARP_MAC_HI` bit 31 set once it came.
pub const REG_ARP_QUERY: u32 = 0x0_001C;
pub const REG_ARP_MAC_LO: u32 = 0x0_0020;
pub const REG_ARP_MAC_HI: u32 = 0x0_0024;
/// `ARP_MAC_HI` bit 31: the answer has come.
pub const ARP_VALID: u32 = 1 << 31;
/// `CMD_DATA[0..16]`: the 64-byte staging window of a table command.
pub const REG_CMD_DATA: u32 = 0x0_0040;
pub const CMD_DATA_WORDS: usize = 16;
/// `CMD`: writing it starts a table command: op in 7:0, table index in 31:8.
pub const REG_CMD: u32 = 0x0_0080;
/// `CMD_STATUS`: bit 0 busy; bits 15:8 the last command's error (the `CMD_ERR_*` codes); bits 31:16 the
/// number of commands completed (wraps).
pub const REG_CMD_STATUS: u32 = 0x0_0084;
/// `COUNTER[i]`: read-only event counters (RX Parse drops by reason, frames sent, ...), 32 bits each.
pub const REG_COUNTERS: u32 = 0x0_0100;
/// Per-QP doorbells: `SQ_DB` at `DB_BASE + qpn * DB_STRIDE` (new send-queue producer index, 16 bits) and
/// `RQ_DB` at `+ 4` (new receive-queue producer index).
pub const DB_BASE: u32 = 0x1_0000;
pub const DB_STRIDE: u32 = 16;
pub const DB_SQ: u32 = 0;
pub const DB_RQ: u32 = 4;
/// Per-CQ doorbell: `CQ_DB` at `CQ_DB_BASE + cqn * CQ_DB_STRIDE`: the driver's consumer index, so the
/// device can tell a full ring (CQ overflow moves the CQ to error instead of overwriting an unread CQE).
pub const CQ_DB_BASE: u32 = 0x2_0000;
pub const CQ_DB_STRIDE: u32 = 8;

pub fn sq_doorbell(qpn: u32) -> u32 {
    DB_BASE + qpn * DB_STRIDE + DB_SQ
}
pub fn rq_doorbell(qpn: u32) -> u32 {
    DB_BASE + qpn * DB_STRIDE + DB_RQ
}
pub fn cq_doorbell(cqn: u32) -> u32 {
    CQ_DB_BASE + cqn * CQ_DB_STRIDE
}

/// `CAPS` bits.
pub const CAP_RC: u32 = 1 << 0;
pub const CAP_UC: u32 = 1 << 1;
pub const CAP_UD: u32 = 1 << 2;
pub const CAP_ATOMIC: u32 = 1 << 3;
pub const CAP_MASKED_ATOMIC: u32 = 1 << 4;
pub const CAP_INLINE: u32 = 1 << 5;
/// RoCEv2 over IPv6 (`CMD_SET_IPV6`, IPv6 QP paths and address handles).
pub const CAP_IPV6: u32 = 1 << 6;
/// The port on an 802.1Q VLAN (`CMD_SET_VLAN`).
pub const CAP_VLAN: u32 = 1 << 7;

// ---------------------------------------------------------------------------------------------------------
// Table commands: CMD_DATA words, then CMD = op | index << 8; poll CMD_STATUS until busy is clear.
// ---------------------------------------------------------------------------------------------------------

/// Write one Key Cache entry; index = key >> 8 (the MR table slot), the key's low byte is its tag.
pub const CMD_WRITE_MR: u8 = 1;
/// Invalidate one Key Cache entry (index = key >> 8).
pub const CMD_INVALIDATE_MR: u8 = 2;
/// Write a QP's static attributes (QP Context `QpStatic`); index = qpn.
pub const CMD_WRITE_QP: u8 = 3;
/// Write a QP's requester state (sq_psn); index = qpn.
pub const CMD_WRITE_QP_REQ: u8 = 4;
/// Write a QP's responder state (rq_psn); index = qpn.
pub const CMD_WRITE_QP_RESP: u8 = 5;
/// Set a send-queue ring up (base, log2 entries, CQ); index = qpn. Resets its indices to 0.
pub const CMD_WRITE_SQ: u8 = 6;
/// Set a receive-queue ring up (base, log2 entries, CQ); index = qpn. Resets its indices to 0.
pub const CMD_WRITE_RQ: u8 = 7;
/// Set a completion-queue ring up (base, log2 entries); index = cqn. Resets its indices and phase.
pub const CMD_WRITE_CQ: u8 = 8;
/// Our IPv6 address (index 0): w0-3 the address as a 128-bit number, w0 its least significant word (address
/// bytes 12..15); all zero turns RoCEv2 over IPv6 off (the reset state): IPv6 frames are then dropped as not IP.
pub const CMD_SET_IPV6: u8 = 9;
/// The port's VLAN (index 0): w0 bit 31 on, 15:0 the tag's control information (PCP 15:13, DEI 12, VID 11:0).
/// On a VLAN every frame the RNIC sends carries the tag and only frames tagged with its VID are taken (the
/// rest counted as `rx_drop_vlan`); off one (the reset state) untagged and priority-tagged (VID 0) frames are
/// taken, frames of other VIDs dropped.
pub const CMD_SET_VLAN: u8 = 10;

pub const CMD_ERR_NONE: u8 = 0;
pub const CMD_ERR_BAD_OP: u8 = 1;
pub const CMD_ERR_BAD_INDEX: u8 = 2;
/// A command written while the previous one is still busy is ignored and reported.
pub const CMD_ERR_BUSY: u8 = 3;

/// A table command as the driver stages it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command {
    pub op: u8,
    pub index: u32,
    pub data: [u32; CMD_DATA_WORDS],
}

impl Command {
    pub fn cmd_word(&self) -> u32 {
        u32::from(self.op) | (self.index << 8)
    }
}

fn lo(v: u64) -> u32 {
    v as u32
}
fn hi(v: u64) -> u32 {
    (v >> 32) as u32
}
fn join(l: u32, h: u32) -> u64 {
    u64::from(l) | u64::from(h) << 32
}

/// `CMD_WRITE_MR` data: w0-1 va, w2-3 length, w4-5 host address of byte `va` (the DMA address the MR maps
/// to), w6 key (lkey = rkey), w7 pd, w8 access (`ibv_access_flags` bits 3:0) and, in bit 8, a
/// fast-registration MR (the only kind a received SEND_WITH_INV may invalidate).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MrCmd {
    pub va: u64,
    pub len: u64,
    pub dma_base: u64,
    pub key: u32,
    pub pd: u32,
    pub access: u8,
    pub fast: bool,
    /// A memory window bound over part of an MR: an rkey only.
    pub mw: bool,
    /// A type 2 window (bound by a send WQE, usable through the binding QP only, invalidated by LOCAL_INV and
    /// SEND_WITH_INV); the driver writes one unbound at `alloc_mw`.
    pub mw2: bool,
    /// The entry is written not valid (a type 2 window free to be bound).
    pub unbound: bool,
}

impl MrCmd {
    pub fn command(&self) -> Command {
        let mut d = [0u32; CMD_DATA_WORDS];
        d[0] = lo(self.va);
        d[1] = hi(self.va);
        d[2] = lo(self.len);
        d[3] = hi(self.len);
        d[4] = lo(self.dma_base);
        d[5] = hi(self.dma_base);
        d[6] = self.key;
        d[7] = self.pd;
        d[8] = u32::from(self.access & 0x1F)
            | u32::from(self.fast) << 8
            | u32::from(self.mw) << 9
            | u32::from(self.mw2) << 10
            | u32::from(self.unbound) << 11;
        Command { op: CMD_WRITE_MR, index: self.key >> 8, data: d }
    }
    pub fn decode(d: &[u32; CMD_DATA_WORDS]) -> Self {
        MrCmd {
            va: join(d[0], d[1]),
            len: join(d[2], d[3]),
            dma_base: join(d[4], d[5]),
            key: d[6],
            pd: d[7],
            access: (d[8] & 0x1F) as u8,
            fast: d[8] & 0x100 != 0,
            mw: d[8] & 0x200 != 0,
            mw2: d[8] & 0x400 != 0,
            unbound: d[8] & 0x800 != 0,
        }
    }
}

/// `CMD_WRITE_QP` data (the QP Context's static word):
/// w0: state 2:0, qp_type 5:4, path_mtu enum 10:8, access 23:16;
/// w1: min_rnr_timer 4:0, timeout 12:8, retry_cnt 18:16, rnr_retry 26:24;
/// w2: max_rd_atomic 7:0, max_dest_rd_atomic 15:8; w3: dest_qpn 23:0; w4: pd; w5: UDP source port 15:0;
/// w6: remote IPv4; w7: remote MAC bytes 2..5; w8: remote MAC bytes 0..1 in 15:0;
/// w0 bit 6: the path is RoCEv2 over IPv6, to the address in w12-15 (a 128-bit number, w12 least significant)
/// instead of w6;
/// w9: send CQ; w10: receive CQ.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpCmd {
    pub state: u8,
    pub qp_type: u8,
    pub path_mtu: u8,
    pub access: u8,
    pub min_rnr_timer: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub dest_qpn: u32,
    pub pd: u32,
    pub sport: u16,
    pub remote_ip: u32,
    /// The path is IPv6 (w0 bit 6), to `remote_ip6` (w12-15).
    pub ipv6: bool,
    pub remote_ip6: u128,
    pub remote_mac: [u8; 6],
    pub send_cq: u32,
    pub recv_cq: u32,
    /// UD: the QP's Q_Key (word 11), which every DETH it receives must carry (QP1: 0x80010000), and which a
    /// send WQE's `remote_qkey` with bit 31 set stands for (IBA).
    pub qkey: u32,
}

impl QpCmd {
    pub fn command(&self, qpn: u32) -> Command {
        let mut d = [0u32; CMD_DATA_WORDS];
        d[0] = u32::from(self.state & 7)
            | u32::from(self.qp_type & 3) << 4
            | u32::from(self.ipv6) << 6
            | u32::from(self.path_mtu & 7) << 8
            | u32::from(self.access) << 16;
        d[1] = u32::from(self.min_rnr_timer & 31)
            | u32::from(self.timeout & 31) << 8
            | u32::from(self.retry_cnt & 7) << 16
            | u32::from(self.rnr_retry & 7) << 24;
        d[2] = u32::from(self.max_rd_atomic) | u32::from(self.max_dest_rd_atomic) << 8;
        d[3] = self.dest_qpn & 0xFF_FFFF;
        d[4] = self.pd;
        d[5] = u32::from(self.sport);
        d[6] = self.remote_ip;
        let m = self.remote_mac;
        d[7] = u32::from_be_bytes([m[2], m[3], m[4], m[5]]);
        d[8] = u32::from(u16::from_be_bytes([m[0], m[1]]));
        d[9] = self.send_cq;
        d[10] = self.recv_cq;
        d[11] = self.qkey;
        d[12..16].copy_from_slice(&u128_words(self.remote_ip6));
        Command { op: CMD_WRITE_QP, index: qpn, data: d }
    }
    pub fn decode(d: &[u32; CMD_DATA_WORDS]) -> Self {
        let a = d[7].to_be_bytes();
        let b = (d[8] as u16).to_be_bytes();
        QpCmd {
            state: (d[0] & 7) as u8,
            qp_type: (d[0] >> 4 & 3) as u8,
            path_mtu: (d[0] >> 8 & 7) as u8,
            access: (d[0] >> 16) as u8,
            min_rnr_timer: (d[1] & 31) as u8,
            timeout: (d[1] >> 8 & 31) as u8,
            retry_cnt: (d[1] >> 16 & 7) as u8,
            rnr_retry: (d[1] >> 24 & 7) as u8,
            max_rd_atomic: d[2] as u8,
            max_dest_rd_atomic: (d[2] >> 8) as u8,
            dest_qpn: d[3] & 0xFF_FFFF,
            pd: d[4],
            sport: d[5] as u16,
            remote_ip: d[6],
            ipv6: d[0] >> 6 & 1 == 1,
            remote_ip6: words_u128(&d[12..16]),
            remote_mac: [b[0], b[1], a[0], a[1], a[2], a[3]],
            send_cq: d[9],
            recv_cq: d[10],
            qkey: d[11],
        }
    }
}

/// A 128-bit command field (an IPv6 address as a number) as four words, the least significant first.
pub fn u128_words(x: u128) -> [u32; 4] {
    std::array::from_fn(|w| (x >> (32 * w)) as u32)
}

/// The inverse of [`u128_words`].
pub fn words_u128(w: &[u32]) -> u128 {
    w.iter().take(4).enumerate().fold(0, |a, (i, &x)| a | u128::from(x) << (32 * i))
}

/// `CMD_WRITE_QP_REQ` / `CMD_WRITE_QP_RESP` data: w0 the PSN (sq_psn or rq_psn) in 23:0.
pub fn psn_command(op: u8, qpn: u32, psn: u32) -> Command {
    let mut d = [0u32; CMD_DATA_WORDS];
    d[0] = psn & 0xFF_FFFF;
    Command { op, index: qpn, data: d }
}

/// `CMD_WRITE_SQ` / `CMD_WRITE_RQ` / `CMD_WRITE_CQ` data: w0-1 ring base (64-byte aligned), w2 log2 of the
/// number of entries (SQ/RQ: 1..15; CQ: 1..16), w3 the CQ the ring completes to (SQ/RQ only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingCmd {
    pub base: u64,
    pub log2_entries: u8,
    pub cqn: u32,
}

impl RingCmd {
    pub fn command(&self, op: u8, index: u32) -> Command {
        let mut d = [0u32; CMD_DATA_WORDS];
        d[0] = lo(self.base);
        d[1] = hi(self.base);
        d[2] = u32::from(self.log2_entries);
        d[3] = self.cqn;
        Command { op, index, data: d }
    }
    pub fn decode(d: &[u32; CMD_DATA_WORDS]) -> Self {
        RingCmd { base: join(d[0], d[1]), log2_entries: d[2] as u8, cqn: d[3] }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Work queue entries: 64 bytes, one 512-bit DMA beat, 64-byte aligned.
// ---------------------------------------------------------------------------------------------------------

pub const WQE_BYTES: usize = 64;
pub const CQE_BYTES: usize = 32;

/// WQE opcodes: `enum ibv_wr_opcode` values (masked atomics as the kernel's `ib_wr_opcode`).
pub const WR_RDMA_WRITE: u8 = 0;
pub const WR_RDMA_WRITE_WITH_IMM: u8 = 1;
pub const WR_SEND: u8 = 2;
pub const WR_SEND_WITH_IMM: u8 = 3;
pub const WR_RDMA_READ: u8 = 4;
pub const WR_ATOMIC_CMP_AND_SWP: u8 = 5;
pub const WR_ATOMIC_FETCH_AND_ADD: u8 = 6;
pub const WR_LOCAL_INV: u8 = 7;
pub const WR_BIND_MW: u8 = 8;
pub const WR_SEND_WITH_INV: u8 = 9;
pub const WR_MASKED_ATOMIC_CMP_AND_SWP: u8 = 12;
pub const WR_MASKED_ATOMIC_FETCH_AND_ADD: u8 = 13;

pub fn wr_opcode_code(op: WrOpcode) -> u8 {
    match op {
        WrOpcode::RdmaWrite => WR_RDMA_WRITE,
        WrOpcode::RdmaWriteWithImm => WR_RDMA_WRITE_WITH_IMM,
        WrOpcode::Send => WR_SEND,
        WrOpcode::SendWithImm => WR_SEND_WITH_IMM,
        WrOpcode::RdmaRead => WR_RDMA_READ,
        WrOpcode::AtomicCmpAndSwp => WR_ATOMIC_CMP_AND_SWP,
        WrOpcode::AtomicFetchAndAdd => WR_ATOMIC_FETCH_AND_ADD,
        WrOpcode::SendWithInv => WR_SEND_WITH_INV,
        WrOpcode::MaskedAtomicCmpAndSwp => WR_MASKED_ATOMIC_CMP_AND_SWP,
        WrOpcode::MaskedAtomicFetchAndAdd => WR_MASKED_ATOMIC_FETCH_AND_ADD,
        WrOpcode::LocalInv => WR_LOCAL_INV,
        WrOpcode::BindMw => WR_BIND_MW,
    }
}

pub fn wr_opcode_of(code: u8) -> Option<WrOpcode> {
    [
        WrOpcode::RdmaWrite,
        WrOpcode::RdmaWriteWithImm,
        WrOpcode::Send,
        WrOpcode::SendWithImm,
        WrOpcode::RdmaRead,
        WrOpcode::AtomicCmpAndSwp,
        WrOpcode::AtomicFetchAndAdd,
        WrOpcode::SendWithInv,
        WrOpcode::MaskedAtomicCmpAndSwp,
        WrOpcode::MaskedAtomicFetchAndAdd,
        WrOpcode::LocalInv,
        WrOpcode::BindMw,
    ]
    .into_iter()
    .find(|&o| wr_opcode_code(o) == code)
}

/// Send WQE flag bits (byte 9).
pub const WQE_SIGNALED: u8 = 1 << 0;
pub const WQE_SOLICITED: u8 = 1 << 1;
/// The payload follows in the next ceil(length / 64) slots instead of being gathered through lkey.
pub const WQE_INLINE: u8 = 1 << 2;
pub const WQE_FENCE: u8 = 1 << 3;
/// Masked atomics: the slot before this WQE is its mask slot ([`mask_slot`]).
pub const WQE_EXT: u8 = 1 << 4;
/// The opcode byte of a mask slot: no `ibv_wr_opcode` has it.
pub const WR_MASK_SLOT: u8 = 0xFF;
/// The opcode byte of a padding slot ([`nop_slot`]): taken and dropped, nothing sent, no completion.
pub const WR_NOP_SLOT: u8 = 0xFE;
/// The most inline bytes one WQE carries (4 data slots).
pub const MAX_INLINE: usize = 256;
/// The RNIC reads a send ring in aligned groups of this many slots at most; an inline WQE and its data slots
/// must lie inside one group (the driver pads with [`nop_slot`]s to the next group when they would not).
pub const SQ_GROUP_SLOTS: usize = 8;

/// Send WQE, 64 bytes:
///
/// | bytes | field |
/// |---|---|
/// | 0..8 | wr_id |
/// | 8 | opcode (`WR_*`) |
/// | 9 | flags (`WQE_*`) |
/// | 10..12 | reserved, 0 |
/// | 12..16 | imm_data, or invalidate_rkey for SEND_WITH_INV and LOCAL_INV, in wire byte order (the ImmDt or IETH as sent) |
/// | 16..24 | local address (the one SGE: a VA inside the lkey's MR) |
/// | 24..28 | length |
/// | 28..32 | lkey |
/// | 32..40 | remote address |
/// | 40..44 | rkey |
/// | 44..48 | reserved, 0 |
/// | 48..56 | compare (CAS) or add (FAA) |
/// | 56..64 | swap (CAS) |
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendWqe {
    pub wr_id: u64,
    pub opcode: u8,
    pub flags: u8,
    /// imm_data as a big-endian value (the 4 wire bytes), or invalidate_rkey (also in wire order).
    pub imm_or_inv: u32,
    pub local_addr: u64,
    pub length: u32,
    pub lkey: u32,
    pub remote_addr: u64,
    pub rkey: u32,
    pub compare_add: u64,
    pub swap: u64,
}

impl SendWqe {
    pub fn encode(&self) -> [u8; WQE_BYTES] {
        let mut b = [0u8; WQE_BYTES];
        b[0..8].copy_from_slice(&self.wr_id.to_le_bytes());
        b[8] = self.opcode;
        b[9] = self.flags;
        b[12..16].copy_from_slice(&self.imm_or_inv.to_be_bytes());
        b[16..24].copy_from_slice(&self.local_addr.to_le_bytes());
        b[24..28].copy_from_slice(&self.length.to_le_bytes());
        b[28..32].copy_from_slice(&self.lkey.to_le_bytes());
        b[32..40].copy_from_slice(&self.remote_addr.to_le_bytes());
        b[40..44].copy_from_slice(&self.rkey.to_le_bytes());
        b[48..56].copy_from_slice(&self.compare_add.to_le_bytes());
        b[56..64].copy_from_slice(&self.swap.to_le_bytes());
        b
    }
    pub fn decode(b: &[u8; WQE_BYTES]) -> Self {
        let u32le = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        let u64le = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
        let imm = u32::from_be_bytes(b[12..16].try_into().unwrap());
        SendWqe {
            wr_id: u64le(0),
            opcode: b[8],
            flags: b[9],
            imm_or_inv: imm,
            local_addr: u64le(16),
            length: u32le(24),
            lkey: u32le(28),
            remote_addr: u64le(32),
            rkey: u32le(40),
            compare_add: u64le(48),
            swap: u64le(56),
        }
    }
    /// Slots this WQE occupies in the ring (itself, the mask slot, inline data slots).
    pub fn slots(&self) -> usize {
        let ext = usize::from(self.flags & WQE_EXT != 0);
        let inl = if self.flags & WQE_INLINE != 0 {
            (self.length as usize).div_ceil(WQE_BYTES)
        } else {
            0
        };
        1 + ext + inl
    }
}

/// The Q_Key of QP1, the GSI QP (`IB_QP1_QKEY`): every DETH to and from QP1 carries it.
pub const GSI_QKEY: u32 = 0x8001_0000;

/// The address handle of a UD send WQE (`CAPS` bit 2): byte 10 hop limit, 11 traffic class, 32..36 remote QPN
/// (23:0, little-endian), 36..40 remote Q_Key (little-endian; bit 31 set: the QP's own, IBA), 40..46 destination
/// MAC (wire order), 46..48 UDP source port (little-endian; 0: the QP's own), 48..64 destination GID (the IPv6
/// address in network order, `::ffff:a.b.c.d` for IPv4). A UD WQE is a SEND or SEND_WITH_IMM, whose remote
/// address, rkey and atomic operands these bytes replace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UdAh {
    pub remote_qpn: u32,
    pub remote_qkey: u32,
    pub dmac: [u8; 6],
    pub sport: u16,
    pub dgid: [u8; 16],
    pub traffic_class: u8,
    pub hop_limit: u8,
}

impl UdAh {
    /// `w` encoded with this address handle in its UD bytes.
    pub fn encode_with(&self, w: &SendWqe) -> [u8; WQE_BYTES] {
        let mut b = w.encode();
        b[10] = self.hop_limit;
        b[11] = self.traffic_class;
        b[32..36].copy_from_slice(&(self.remote_qpn & 0xFF_FFFF).to_le_bytes());
        b[36..40].copy_from_slice(&self.remote_qkey.to_le_bytes());
        b[40..46].copy_from_slice(&self.dmac);
        b[46..48].copy_from_slice(&self.sport.to_le_bytes());
        b[48..64].copy_from_slice(&self.dgid);
        b
    }
    pub fn decode(b: &[u8; WQE_BYTES]) -> Self {
        UdAh {
            remote_qpn: u32::from_le_bytes(b[32..36].try_into().unwrap()) & 0xFF_FFFF,
            remote_qkey: u32::from_le_bytes(b[36..40].try_into().unwrap()),
            dmac: b[40..46].try_into().unwrap(),
            sport: u16::from_le_bytes([b[46], b[47]]),
            dgid: b[48..64].try_into().unwrap(),
            traffic_class: b[11],
            hop_limit: b[10],
        }
    }
}

/// The GID of an IP address: the IPv6 address itself, an IPv4 one mapped (`::ffff:a.b.c.d`), as RoCEv2 GIDs are.
pub fn gid_of(ip: std::net::IpAddr) -> [u8; 16] {
    match ip {
        std::net::IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        std::net::IpAddr::V6(a) => a.octets(),
    }
}

/// A padding slot: the driver puts these before an inline WQE that would otherwise cross a group of
/// [`SQ_GROUP_SLOTS`] slots; the RNIC drops them. They count as the next WQE's slots when it completes.
pub fn nop_slot() -> [u8; WQE_BYTES] {
    let mut b = [0u8; WQE_BYTES];
    b[8] = WR_NOP_SLOT;
    b
}

/// How many padding slots go before a WQE of `n` slots that would start at ring index `idx` in a ring of
/// `entries` slots, so that it lies inside one aligned group of min([`SQ_GROUP_SLOTS`], `entries`) slots;
/// `None` when it is larger than a group.
pub fn group_pad(idx: u16, n: usize, entries: u32) -> Option<usize> {
    let g = SQ_GROUP_SLOTS.min(entries as usize);
    if n > g {
        return None;
    }
    let off = usize::from(idx) % g;
    Some(if off + n > g { g - off } else { 0 })
}

/// The mask slot a masked-atomic WQE comes after: opcode byte (8) [`WR_MASK_SLOT`], compare_add_mask in bytes
/// 16..24 and swap_mask in 24..32 (little-endian), the rest 0. It goes first so that each slot is
/// self-describing: the RNIC takes slots one at a time, other QPs' slots between them, and keeps the masks
/// of the QP's last mask slot until its masked WQE comes.
pub fn mask_slot(compare_add_mask: u64, swap_mask: u64) -> [u8; WQE_BYTES] {
    let mut b = [0u8; WQE_BYTES];
    b[8] = WR_MASK_SLOT;
    b[16..24].copy_from_slice(&compare_add_mask.to_le_bytes());
    b[24..32].copy_from_slice(&swap_mask.to_le_bytes());
    b
}

/// Receive WQE, 64 bytes: 0..8 wr_id, 8..16 address, 16..20 length, 20..24 lkey, the rest reserved (0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecvWqe {
    pub wr_id: u64,
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

impl RecvWqe {
    pub fn encode(&self) -> [u8; WQE_BYTES] {
        let mut b = [0u8; WQE_BYTES];
        b[0..8].copy_from_slice(&self.wr_id.to_le_bytes());
        b[8..16].copy_from_slice(&self.addr.to_le_bytes());
        b[16..20].copy_from_slice(&self.length.to_le_bytes());
        b[20..24].copy_from_slice(&self.lkey.to_le_bytes());
        b
    }
    pub fn decode(b: &[u8; WQE_BYTES]) -> Self {
        RecvWqe {
            wr_id: u64::from_le_bytes(b[0..8].try_into().unwrap()),
            addr: u64::from_le_bytes(b[8..16].try_into().unwrap()),
            length: u32::from_le_bytes(b[16..20].try_into().unwrap()),
            lkey: u32::from_le_bytes(b[20..24].try_into().unwrap()),
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Completion queue entries: 32 bytes, two per 64-byte beat, written with a 32-byte strobe.
// ---------------------------------------------------------------------------------------------------------

/// CQE status codes: `enum ibv_wc_status` values.
pub fn wc_status_code(s: WcStatus) -> u8 {
    s as u8
}
pub fn wc_status_of(code: u8) -> Option<WcStatus> {
    use WcStatus::*;
    [
        Success, LocLenErr, LocQpOpErr, LocEecOpErr, LocProtErr, WrFlushErr, MwBindErr, BadRespErr,
        LocAccessErr, RemInvReqErr, RemAccessErr, RemOpErr, RetryExcErr, RnrRetryExcErr, LocRddViolErr,
        RemInvRdReqErr, RemAbortErr, InvEecnErr, InvEecStateErr, FatalErr, RespTimeoutErr, GeneralErr,
    ]
    .into_iter()
    .find(|&x| x as u8 == code)
}

/// CQE opcodes: `enum ibv_wc_opcode` values (masked atomics as the kernel's `ib_wc_opcode`).
pub const WC_SEND: u8 = 0;
pub const WC_RDMA_WRITE: u8 = 1;
pub const WC_RDMA_READ: u8 = 2;
pub const WC_COMP_SWAP: u8 = 3;
pub const WC_FETCH_ADD: u8 = 4;
pub const WC_BIND_MW: u8 = 5;
pub const WC_LOCAL_INV: u8 = 6;
pub const WC_MASKED_COMP_SWAP: u8 = 9;
pub const WC_MASKED_FETCH_ADD: u8 = 10;
pub const WC_RECV: u8 = 128;
pub const WC_RECV_RDMA_WITH_IMM: u8 = 129;

pub fn wc_opcode_code(op: WcOpcode) -> u8 {
    match op {
        WcOpcode::Send => WC_SEND,
        WcOpcode::RdmaWrite => WC_RDMA_WRITE,
        WcOpcode::RdmaRead => WC_RDMA_READ,
        WcOpcode::CompSwap => WC_COMP_SWAP,
        WcOpcode::FetchAdd => WC_FETCH_ADD,
        WcOpcode::MaskedCompSwap => WC_MASKED_COMP_SWAP,
        WcOpcode::MaskedFetchAdd => WC_MASKED_FETCH_ADD,
        WcOpcode::LocalInv => WC_LOCAL_INV,
        WcOpcode::BindMw => WC_BIND_MW,
        WcOpcode::Recv => WC_RECV,
        WcOpcode::RecvRdmaWithImm => WC_RECV_RDMA_WITH_IMM,
    }
}

pub fn wc_opcode_of(code: u8) -> Option<WcOpcode> {
    use WcOpcode::*;
    [Send, RdmaWrite, RdmaRead, CompSwap, FetchAdd, MaskedCompSwap, MaskedFetchAdd, BindMw, LocalInv, Recv, RecvRdmaWithImm]
        .into_iter()
        .find(|&o| wc_opcode_code(o) == code)
}

/// CQE, 32 bytes:
///
/// | bytes | field |
/// |---|---|
/// | 0..8 | wr_id |
/// | 8..12 | byte_len |
/// | 12..16 | imm_data in wire byte order (WITH_IMM), or the invalidated rkey (WITH_INV, little-endian) |
/// | 16..20 | qp_num (23:0) |
/// | 20..24 | src_qp (23:0) |
/// | 24 | status (`ibv_wc_status`) |
/// | 25 | opcode (`ibv_wc_opcode`) |
/// | 26 | wc_flags (`ibv_wc_flags` 7:0) |
/// | 27 | reserved, 0 |
/// | 28..32 | bit 31: phase; the rest reserved (0) |
///
/// The phase bit of a fresh ring's first pass is 1 (the driver zeroes the ring), and flips on each wrap: a
/// CQE is new when its phase equals the pass the driver expects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cqe {
    pub wr_id: u64,
    pub byte_len: u32,
    pub imm_or_inv: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub status: u8,
    pub opcode: u8,
    pub wc_flags: u8,
    pub phase: bool,
}

impl Cqe {
    pub fn encode(&self) -> [u8; CQE_BYTES] {
        let mut b = [0u8; CQE_BYTES];
        b[0..8].copy_from_slice(&self.wr_id.to_le_bytes());
        b[8..12].copy_from_slice(&self.byte_len.to_le_bytes());
        if u32::from(self.wc_flags) & WcFlags::WITH_INV != 0 {
            b[12..16].copy_from_slice(&self.imm_or_inv.to_le_bytes());
        } else {
            b[12..16].copy_from_slice(&self.imm_or_inv.to_be_bytes());
        }
        b[16..20].copy_from_slice(&(self.qp_num & 0xFF_FFFF).to_le_bytes());
        b[20..24].copy_from_slice(&(self.src_qp & 0xFF_FFFF).to_le_bytes());
        b[24] = self.status;
        b[25] = self.opcode;
        b[26] = self.wc_flags;
        b[28..32].copy_from_slice(&(u32::from(self.phase) << 31).to_le_bytes());
        b
    }
    pub fn decode(b: &[u8; CQE_BYTES]) -> Self {
        let u32le = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        let inv = u32::from(b[26]) & WcFlags::WITH_INV != 0;
        Cqe {
            wr_id: u64::from_le_bytes(b[0..8].try_into().unwrap()),
            byte_len: u32le(8),
            imm_or_inv: if inv { u32le(12) } else { u32::from_be_bytes(b[12..16].try_into().unwrap()) },
            qp_num: u32le(16) & 0xFF_FFFF,
            src_qp: u32le(20) & 0xFF_FFFF,
            status: b[24],
            opcode: b[25],
            wc_flags: b[26],
            phase: u32le(28) >> 31 == 1,
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// DMA ports.
// ---------------------------------------------------------------------------------------------------------

/// Bytes per DMA beat (the 512-bit datapath).
pub const DMA_BEAT_BYTES: usize = 64;
/// Largest single DMA request in bytes (one path MTU of payload; also the AXI4 4 KiB boundary rule: the
/// AXI4 master adapter splits a request that crosses a 4 KiB boundary).
pub const DMA_MAX_BYTES: usize = 4096;

/// The beats a DMA read of `len` bytes at `addr` returns: the 64-byte-aligned window covering them.
pub fn dma_beats(addr: u64, len: u32) -> u32 {
    if len == 0 {
        return 0;
    }
    let first = addr / DMA_BEAT_BYTES as u64;
    let last = (addr + u64::from(len) - 1) / DMA_BEAT_BYTES as u64;
    (last - first + 1) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Padding keeps a WQE of n slots inside one aligned group: none when it fits, the rest of the group when
    /// it would cross, refused when larger than the group (8 slots, or the ring when smaller).
    #[test]
    fn group_pad_keeps_an_inline_wqe_inside_one_read_group() {
        assert_eq!(group_pad(0, 5, 64), Some(0));
        assert_eq!(group_pad(3, 5, 64), Some(0));
        assert_eq!(group_pad(4, 5, 64), Some(4));
        assert_eq!(group_pad(7, 2, 64), Some(1));
        assert_eq!(group_pad(7, 1, 64), Some(0));
        assert_eq!(group_pad(0xFFFF, 2, 64), Some(1), "a free-running index past 2^16");
        assert_eq!(group_pad(2, 3, 4), Some(2), "a 4-slot ring: the group is the ring");
        assert_eq!(group_pad(0, 5, 4), None);
        assert_eq!(group_pad(0, 9, 64), None);
        for idx in 0..64u16 {
            for n in 1..=SQ_GROUP_SLOTS {
                let p = group_pad(idx, n, 64).unwrap();
                let start = usize::from(idx) + p;
                assert_eq!(start / SQ_GROUP_SLOTS, (start + n - 1) / SQ_GROUP_SLOTS, "idx {idx} n {n}");
                assert!(p < SQ_GROUP_SLOTS);
            }
        }
        assert_eq!(nop_slot()[8], WR_NOP_SLOT);
    }

    #[test]
    fn wqe_cqe_layouts_round_trip() {
        let w = SendWqe {
            wr_id: 0x0102_0304_0506_0708,
            opcode: WR_RDMA_WRITE_WITH_IMM,
            flags: WQE_SIGNALED | WQE_SOLICITED,
            imm_or_inv: 0xDEAD_BEEF,
            local_addr: 0x1000_2000_3000,
            length: 4097,
            lkey: 0x1234_56,
            remote_addr: 0x7F00_0000_1000,
            rkey: 0x9988_77,
            compare_add: 5,
            swap: 6,
        };
        let b = w.encode();
        assert_eq!(&b[12..16], &[0xDE, 0xAD, 0xBE, 0xEF], "imm_data is kept in wire order");
        assert_eq!(b[8], 1);
        assert_eq!(SendWqe::decode(&b), w);
        let r = RecvWqe { wr_id: 9, addr: 0x4000, length: 100, lkey: 0x301 };
        assert_eq!(RecvWqe::decode(&r.encode()), r);
        let c = Cqe {
            wr_id: 77,
            byte_len: 1 << 20,
            imm_or_inv: 0x0A0B_0C0D,
            qp_num: 0x11,
            src_qp: 0x12,
            status: wc_status_code(WcStatus::RemAccessErr),
            opcode: WC_RECV_RDMA_WITH_IMM,
            wc_flags: WcFlags::WITH_IMM as u8,
            phase: true,
        };
        let b = c.encode();
        assert_eq!(b[31] & 0x80, 0x80, "phase is bit 31 of the last word");
        assert_eq!(Cqe::decode(&b), c);
    }

    #[test]
    fn opcode_and_status_codes_are_the_verbs_values() {
        assert_eq!(wr_opcode_code(WrOpcode::RdmaRead), 4);
        assert_eq!(wr_opcode_code(WrOpcode::SendWithInv), 9);
        for code in 0..=255u8 {
            if let Some(op) = wr_opcode_of(code) {
                assert_eq!(wr_opcode_code(op), code);
            }
            if let Some(op) = wc_opcode_of(code) {
                assert_eq!(wc_opcode_code(op), code);
            }
            if let Some(s) = wc_status_of(code) {
                assert_eq!(wc_status_code(s), code);
            }
        }
        assert_eq!(wc_status_code(WcStatus::WrFlushErr), 5);
        assert_eq!(wc_status_code(WcStatus::RetryExcErr), 12);
        assert_eq!(wc_status_code(WcStatus::RnrRetryExcErr), 13);
        assert_eq!(wc_opcode_of(129), Some(WcOpcode::RecvRdmaWithImm));
    }

    #[test]
    fn table_commands_round_trip() {
        let m = MrCmd { va: 0x7F00_0000_1000, len: 1 << 21, dma_base: 0x8000_0000, key: 0x2FA, pd: 3, access: 0xF, fast: false, mw: false, mw2: false, unbound: false };
        let c = m.command();
        assert_eq!(c.index, 2);
        assert_eq!(c.cmd_word(), 0x201);
        assert_eq!(MrCmd::decode(&c.data), m);
        let f = MrCmd { fast: true, ..m };
        assert_eq!(f.command().data[8], 0x10F, "the fast-registration flag in w8 bit 8");
        assert_eq!(MrCmd::decode(&f.command().data), f);
        let q = QpCmd {
            state: 3,
            qp_type: 0,
            path_mtu: 5,
            access: 0xE,
            min_rnr_timer: 12,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            max_rd_atomic: 16,
            max_dest_rd_atomic: 16,
            dest_qpn: 0x11,
            pd: 1,
            sport: 0xC000,
            remote_ip: 0x0A00_0001,
            ipv6: true,
            remote_ip6: 0xFD00_0000_0000_0000_1122_3344_5566_7788,
            remote_mac: [0x52, 0x54, 0, 0x12, 0x34, 0x56],
            send_cq: 1,
            recv_cq: 2,
            qkey: 0x8001_0000,
        };
        assert_eq!(QpCmd::decode(&q.command(0x11).data), q);
        assert_eq!(q.command(0x11).data[11], 0x8001_0000, "the Q_Key in word 11");
        let r = RingCmd { base: 0x1_0000, log2_entries: 8, cqn: 3 };
        assert_eq!(RingCmd::decode(&r.command(CMD_WRITE_SQ, 5).data), r);
        assert_eq!(sq_doorbell(2), 0x1_0020);
        assert_eq!(rq_doorbell(2), 0x1_0024);
        assert_eq!(cq_doorbell(3), 0x2_0018);
    }

    #[test]
    fn dma_beat_windows() {
        assert_eq!(dma_beats(0, 0), 0);
        assert_eq!(dma_beats(0, 64), 1);
        assert_eq!(dma_beats(63, 2), 2);
        assert_eq!(dma_beats(60, 4096), 65);
        assert_eq!(dma_beats(64, 4096), 64);
    }
}
