//! Register and Doorbell slave: the host's window into the RNIC, AXI4-Lite shaped (32-bit data,
//! `rnic_driver::host::CSR_ADDR_BITS` = 20-bit byte address). The register map, command words and error codes
//! are `rnic_driver::host`'s; every one of them enters the logic as a `Constant<>` computed in [`Csr::new`].
//!
//! * **Read-only**: `ID`, `VERSION`, `CAPS` (given at construction, default 0: the top sets it), `SIZES` (log2
//!   QPs 7:0, log2 MR entries 15:8, log2 CQs 23:16, largest path MTU enum 31:24, given at construction),
//!   `CMD_STATUS`, `COUNTER[0..64]`. Writes to them answer OKAY and change nothing.
//! * **Read/write**: `MAC_LO`, `MAC_HI` (bits 15:0; 31:16 read 0), `IPV4`, `CMD_DATA[0..16]`, honouring `wstrb`
//!   per byte. `mac` is MAC byte 0 in 47:40 ... byte 5 in 7:0 (the datapath's big-endian fold); `ipv4` is
//!   `IPV4` as written.
//! * **ARP resolution**: `ARP_QUERY` (read/write, an IPv4 address as `IPV4`): a write (any strobe) pulses
//!   `arp_go` with `arp_query` the new value, and the ARP block sends a request for it; `ARP_MAC_LO` /
//!   `ARP_MAC_HI` (read-only) show the answer, `arp_mac` as `MAC_LO`/`MAC_HI` lay out ours, with
//!   `arp_valid` in `ARP_MAC_HI` bit 31 (cleared by the next query).
//! * **CMD** (`op` 7:0, `index` 31:8; reads back the last command word taken): starts a table command.
//!   `CMD_DATA` is copied into `cmd_data` (word i in bits 32i+31:32i) when the command starts, so `cmd_op`,
//!   `cmd_index` and `cmd_data` stay stable from `cmd_valid` until `cmd_done`, and the driver may stage the
//!   next command meanwhile. `cmd_valid` drops at `cmd_ready`; `cmd_done` (one cycle, with `cmd_err`) ends
//!   the command (it may come in the `cmd_ready` cycle). An op not among `rnic_driver::host`'s `CMD_*` completes
//!   at once with `CMD_ERR_BAD_OP` and raises no `cmd_valid`; a `CMD` write while busy is ignored and sets
//!   `CMD_ERR_BUSY`. `CMD_STATUS` fields (busy, last error, completed count) change together, one cycle after
//!   `cmd_done` (or the bad-op write), and busy is already set when the `CMD` write's B response leaves.
//! * **Doorbells**: writes to `DB_BASE + qpn * DB_STRIDE + DB_SQ / DB_RQ` and `CQ_DB_BASE + cqn *
//!   CQ_DB_STRIDE` (qpn < 2^log2 QPs, cqn < 2^log2 CQs) queue `{kind, index, wdata[15:0]}` (wstrb ignored) in
//!   a 16-entry LUTRAM FIFO that feeds the `db_*` stream. A doorbell write that finds the FIFO full waits in
//!   the slave (no B response; awready/wready stay low because the one write is still held): never dropped.
//!   Doorbells read as 0 (OKAY). Any other address, including an out-of-range QPN/CQN, answers SLVERR (reads
//!   give 0) and has no effect.
//! * **Counter window**: a read of `REG_COUNTERS + 4 i` drives `ctr_index = i` (held until the next read)
//!   and samples `ctr_value` [`CTR_LATENCY`] = 2 cycles after `ctr_index` changes, so the counters' owner may
//!   register the index and its mux output once each.
//!
//! Address bits 1:0 are ignored. One write and one read are processed at a time; aw and w are taken
//! independently (each into a holding register, awready = !held), B/R wait for bready/rready as long as the
//! master likes. Write: handshake → address decoded (one cycle, a table on the register page's word offset)
//! → executed when aw and w are both held and B is free: bvalid rises 3 cycles after the later of the aw/w
//! handshakes at the earliest. Read: AR → decode → register mux (registered) → wait → `ctr_value` sample:
//! rvalid rises 5 cycles after the AR handshake. Registers have no reset (FPGA initial values: all 0).

use crate::common::consts::k;
use crate::common::fifo::Fifo;
use crate::common::lut::Lut8;
use rust_hdl::prelude::*;
use rnic_driver::host::{
    CMD_DATA_WORDS, CMD_ERR_BAD_OP, CMD_ERR_BUSY, CMD_INVALIDATE_MR, CMD_WRITE_CQ, CMD_WRITE_MR, CMD_WRITE_QP,
    CMD_SET_IPV6, CMD_SET_VLAN, CMD_WRITE_QP_REQ, CMD_WRITE_QP_RESP, CMD_WRITE_RQ, CMD_WRITE_SQ, CQ_DB_BASE, CQ_DB_STRIDE, CSR_ADDR_BITS, DB_BASE,
    DB_RQ, DB_SQ, DB_STRIDE, ID_VALUE, REG_CAPS, REG_CMD, REG_CMD_DATA, REG_CMD_STATUS, REG_COUNTERS, REG_ID, REG_IPV4,
    REG_MAC_HI, REG_MAC_LO, REG_SIZES, REG_VERSION, VERSION_VALUE, REG_ARP_QUERY, REG_ARP_MAC_LO, REG_ARP_MAC_HI,
};

/// Cycles from a change of `ctr_index` to the cycle whose `ctr_value` is sampled.
pub const CTR_LATENCY: usize = 2;
/// Counters in the window.
pub const COUNTERS: usize = 64;
/// `db_kind`: send-queue doorbell.
pub const DB_KIND_SQ: u64 = 0;
/// `db_kind`: receive-queue doorbell.
pub const DB_KIND_RQ: u64 = 1;
/// `db_kind`: completion-queue doorbell.
pub const DB_KIND_CQ: u64 = 2;
/// AXI response codes.
pub const RESP_OKAY: u64 = 0;
pub const RESP_SLVERR: u64 = 2;
/// The table commands the slave passes on (`rnic_driver::host`'s `CMD_*` list).
pub const COMMAND_OPS: [u8; 10] = [
    CMD_WRITE_MR,
    CMD_INVALIDATE_MR,
    CMD_WRITE_QP,
    CMD_WRITE_QP_REQ,
    CMD_WRITE_QP_RESP,
    CMD_WRITE_SQ,
    CMD_WRITE_RQ,
    CMD_WRITE_CQ,
    CMD_SET_IPV6,
    CMD_SET_VLAN,
];

const _: () = assert!(CSR_ADDR_BITS == 20 && CMD_DATA_WORDS == 16 && COUNTERS == 64);

// Register-select codes (internal): 0..15 CMD_DATA word, then the others. The read mux in `Csr::update`
// matches these as literals; `Csr::new` checks the two agree.
const SEL_ID: u64 = 16;
const SEL_VERSION: u64 = 17;
const SEL_CAPS: u64 = 18;
const SEL_SIZES: u64 = 19;
const SEL_MAC_LO: u64 = 20;
const SEL_MAC_HI: u64 = 21;
const SEL_IPV4: u64 = 22;
const SEL_CMD: u64 = 23;
const SEL_STATUS: u64 = 24;
const SEL_COUNTER: u64 = 25;
const SEL_ARP_QUERY: u64 = 26;
const SEL_ARP_MAC_LO: u64 = 27;
const SEL_ARP_MAC_HI: u64 = 28;
const SEL_NONE: u64 = 31;

/// Bytes covered by the register-page decode table (256 words, indexed by address bits 9:2).
const PAGE_BYTES: u32 = 1024;

/// The register page's decode table: per word offset, bits 15:0 the CMD_DATA word one-hot, 20:16 the
/// select code, 21 mapped, 27:22 the counter index.
fn page_table(base: u32) -> Vec<u64> {
    let mut t = vec![SEL_NONE << 16; 256];
    let mut put = |addr: u32, v: u64| {
        assert!(addr >= base && addr < base + PAGE_BYTES && addr % 4 == 0, "register {addr:#x} outside the page");
        let w = ((addr - base) / 4) as usize;
        assert_eq!(t[w] >> 21 & 1, 0, "two registers at {addr:#x}");
        t[w] = v | 1 << 21;
    };
    for (a, s) in [
        (REG_ID, SEL_ID),
        (REG_VERSION, SEL_VERSION),
        (REG_CAPS, SEL_CAPS),
        (REG_SIZES, SEL_SIZES),
        (REG_MAC_LO, SEL_MAC_LO),
        (REG_MAC_HI, SEL_MAC_HI),
        (REG_IPV4, SEL_IPV4),
        (REG_CMD, SEL_CMD),
        (REG_CMD_STATUS, SEL_STATUS),
        (REG_ARP_QUERY, SEL_ARP_QUERY),
        (REG_ARP_MAC_LO, SEL_ARP_MAC_LO),
        (REG_ARP_MAC_HI, SEL_ARP_MAC_HI),
    ] {
        put(a, s << 16);
    }
    for i in 0..CMD_DATA_WORDS {
        put(REG_CMD_DATA + 4 * i as u32, (i as u64) << 16 | 1 << i);
    }
    for i in 0..COUNTERS {
        put(REG_COUNTERS + 4 * i as u32, SEL_COUNTER << 16 | (i as u64) << 22);
    }
    t
}

fn pow2_log(v: u32) -> u64 {
    assert!(v.is_power_of_two(), "{v} is not a power of two");
    v.trailing_zeros() as u64
}

/// Address decoder (combinational), used once for writes and once for reads.
#[derive(LogicBlock)]
pub struct AddrDecode {
    pub addr: Signal<In, Bits<20>>,
    /// CMD_DATA word one-hot.
    pub oh: Signal<Out, Bits<16>>,
    /// Register select code (`SEL_NONE` off the register page).
    pub code: Signal<Out, Bits<5>>,
    /// Counter index (meaningful with the counter code).
    pub ctr_idx: Signal<Out, Bits<6>>,
    /// A register, counter or in-range doorbell.
    pub ok: Signal<Out, Bit>,
    /// An in-range doorbell.
    pub is_db: Signal<Out, Bit>,
    pub kind: Signal<Out, Bits<2>>,
    /// QPN or CQN of a doorbell.
    pub index: Signal<Out, Bits<24>>,
    page: Lut8<28>,
    t: Signal<Local, Bits<28>>,
    page_hit: Signal<Local, Bit>,
    sq: Signal<Local, Bit>,
    rq: Signal<Local, Bit>,
    cq: Signal<Local, Bit>,
    qpn: Signal<Local, Bits<20>>,
    cqn: Signal<Local, Bits<20>>,
    k_page_mask: Constant<Bits<20>>,
    k_page_base: Constant<Bits<20>>,
    k_qwin_mask: Constant<Bits<20>>,
    k_db_base: Constant<Bits<20>>,
    k_db_off_mask: Constant<Bits<20>>,
    k_db_sq: Constant<Bits<20>>,
    k_db_rq: Constant<Bits<20>>,
    k_qpn_mask: Constant<Bits<20>>,
    k_qpn_shift: Constant<Bits<5>>,
    k_cwin_mask: Constant<Bits<20>>,
    k_cq_base: Constant<Bits<20>>,
    k_cq_off_mask: Constant<Bits<20>>,
    k_cq_off: Constant<Bits<20>>,
    k_cqn_mask: Constant<Bits<20>>,
    k_cqn_shift: Constant<Bits<5>>,
    k_kind_sq: Constant<Bits<2>>,
    k_kind_rq: Constant<Bits<2>>,
    k_kind_cq: Constant<Bits<2>>,
    k_none: Constant<Bits<5>>,
    k_zero16: Constant<Bits<16>>,
}

impl AddrDecode {
    pub fn new(log2_qps: u32, log2_cqs: u32) -> Self {
        let amask = (1u32 << CSR_ADDR_BITS) - 1;
        let page_base = REG_ID & !(PAGE_BYTES - 1);
        // the doorbell windows: in range QPNs/CQNs only, aligned, inside the address space
        let qwin = (1u32 << log2_qps) * DB_STRIDE;
        let cwin = (1u32 << log2_cqs) * CQ_DB_STRIDE;
        assert!(log2_qps <= 24 && log2_cqs <= 24);
        assert!(DB_BASE % qwin == 0 && DB_BASE + qwin <= CQ_DB_BASE, "QP doorbell window {qwin:#x} at {DB_BASE:#x}");
        assert!(CQ_DB_BASE % cwin == 0 && CQ_DB_BASE + cwin - 1 <= amask, "CQ doorbell window {cwin:#x}");
        assert!(page_base + PAGE_BYTES <= DB_BASE, "register page overlaps the doorbells");
        let qshift = pow2_log(DB_STRIDE);
        let cshift = pow2_log(CQ_DB_STRIDE);
        assert!(DB_SQ != DB_RQ && DB_SQ % 4 == 0 && DB_RQ % 4 == 0 && DB_SQ.max(DB_RQ) < DB_STRIDE);
        assert!(CQ_DB_STRIDE >= 4);
        let word_off = |stride: u32| u64::from((stride - 1) & !3);
        Self {
            addr: Default::default(),
            oh: Default::default(),
            code: Default::default(),
            ctr_idx: Default::default(),
            ok: Default::default(),
            is_db: Default::default(),
            kind: Default::default(),
            index: Default::default(),
            page: Lut8::new(page_table(page_base)),
            t: Default::default(),
            page_hit: Default::default(),
            sq: Default::default(),
            rq: Default::default(),
            cq: Default::default(),
            qpn: Default::default(),
            cqn: Default::default(),
            k_page_mask: k(u64::from(amask & !(PAGE_BYTES - 1))),
            k_page_base: k(u64::from(page_base)),
            k_qwin_mask: k(u64::from(amask & !(qwin - 1))),
            k_db_base: k(u64::from(DB_BASE)),
            k_db_off_mask: k(word_off(DB_STRIDE)),
            k_db_sq: k(u64::from(DB_SQ)),
            k_db_rq: k(u64::from(DB_RQ)),
            k_qpn_mask: k(u64::from((qwin - 1) & !(DB_STRIDE - 1))),
            k_qpn_shift: k(qshift),
            k_cwin_mask: k(u64::from(amask & !(cwin - 1))),
            k_cq_base: k(u64::from(CQ_DB_BASE)),
            k_cq_off_mask: k(word_off(CQ_DB_STRIDE)),
            k_cq_off: k(0),
            k_cqn_mask: k(u64::from((cwin - 1) & !(CQ_DB_STRIDE - 1))),
            k_cqn_shift: k(cshift),
            k_kind_sq: k(DB_KIND_SQ),
            k_kind_rq: k(DB_KIND_RQ),
            k_kind_cq: k(DB_KIND_CQ),
            k_none: k(SEL_NONE),
            k_zero16: k(0),
        }
    }
}

impl Logic for AddrDecode {
    #[hdl_gen]
    fn update(&mut self) {
        self.page.x.next = self.addr.val().get_bits::<8>(2);
        self.t.next = self.page.y.val();
        self.page_hit.next = (self.addr.val() & self.k_page_mask.val()) == self.k_page_base.val();
        self.sq.next = ((self.addr.val() & self.k_qwin_mask.val()) == self.k_db_base.val())
            & ((self.addr.val() & self.k_db_off_mask.val()) == self.k_db_sq.val());
        self.rq.next = ((self.addr.val() & self.k_qwin_mask.val()) == self.k_db_base.val())
            & ((self.addr.val() & self.k_db_off_mask.val()) == self.k_db_rq.val());
        self.cq.next = ((self.addr.val() & self.k_cwin_mask.val()) == self.k_cq_base.val())
            & ((self.addr.val() & self.k_cq_off_mask.val()) == self.k_cq_off.val());
        self.qpn.next = (self.addr.val() & self.k_qpn_mask.val()) >> self.k_qpn_shift.val();
        self.cqn.next = (self.addr.val() & self.k_cqn_mask.val()) >> self.k_cqn_shift.val();
        self.oh.next = self.k_zero16.val();
        self.code.next = self.k_none.val();
        if self.page_hit.val() {
            self.oh.next = self.t.val().get_bits::<16>(0);
            self.code.next = self.t.val().get_bits::<5>(16);
        }
        self.ctr_idx.next = self.t.val().get_bits::<6>(22);
        self.ok.next = (self.page_hit.val() & self.t.val().get_bit(21)) | self.sq.val() | self.rq.val() | self.cq.val();
        self.is_db.next = self.sq.val() | self.rq.val() | self.cq.val();
        self.kind.next = self.k_kind_cq.val();
        self.index.next = bit_cast::<24, 20>(self.cqn.val());
        if self.sq.val() {
            self.kind.next = self.k_kind_sq.val();
            self.index.next = bit_cast::<24, 20>(self.qpn.val());
        }
        if self.rq.val() {
            self.kind.next = self.k_kind_rq.val();
            self.index.next = bit_cast::<24, 20>(self.qpn.val());
        }
    }
}

/// The register and doorbell slave. See the module documentation.
#[derive(LogicBlock)]
pub struct Csr {
    pub clock: Signal<In, Clock>,
    // AXI4-Lite slave
    pub awvalid: Signal<In, Bit>,
    pub awready: Signal<Out, Bit>,
    pub awaddr: Signal<In, Bits<20>>,
    pub wvalid: Signal<In, Bit>,
    pub wready: Signal<Out, Bit>,
    pub wdata: Signal<In, Bits<32>>,
    pub wstrb: Signal<In, Bits<4>>,
    pub bvalid: Signal<Out, Bit>,
    pub bready: Signal<In, Bit>,
    pub bresp: Signal<Out, Bits<2>>,
    pub arvalid: Signal<In, Bit>,
    pub arready: Signal<Out, Bit>,
    pub araddr: Signal<In, Bits<20>>,
    pub rvalid: Signal<Out, Bit>,
    pub rready: Signal<In, Bit>,
    pub rdata: Signal<Out, Bits<32>>,
    pub rresp: Signal<Out, Bits<2>>,
    // to the datapath
    pub mac: Signal<Out, Bits<48>>,
    pub ipv4: Signal<Out, Bits<32>>,
    // ARP resolution: a query (the address, and a pulse when it is written) and its answer
    pub arp_query: Signal<Out, Bits<32>>,
    pub arp_go: Signal<Out, Bit>,
    pub arp_mac: Signal<In, Bits<48>>,
    pub arp_valid: Signal<In, Bit>,
    // table commands
    pub cmd_valid: Signal<Out, Bit>,
    pub cmd_ready: Signal<In, Bit>,
    pub cmd_op: Signal<Out, Bits<8>>,
    pub cmd_index: Signal<Out, Bits<24>>,
    pub cmd_data: Signal<Out, Bits<512>>,
    pub cmd_done: Signal<In, Bit>,
    pub cmd_err: Signal<In, Bits<8>>,
    // doorbell stream
    pub db_valid: Signal<Out, Bit>,
    pub db_ready: Signal<In, Bit>,
    pub db_kind: Signal<Out, Bits<2>>,
    pub db_index: Signal<Out, Bits<24>>,
    pub db_value: Signal<Out, Bits<16>>,
    // counter window
    pub ctr_index: Signal<Out, Bits<6>>,
    pub ctr_value: Signal<In, Bits<32>>,
    // write: holding registers
    aw_full: DFF<Bit>,
    aw_addr: DFF<Bits<20>>,
    aw_dv: DFF<Bit>,
    w_full: DFF<Bit>,
    w_data: DFF<Bits<32>>,
    w_strb: DFF<Bits<4>>,
    w_dv: DFF<Bit>,
    w_opok: DFF<Bit>,
    // write: decoded address
    awd: AddrDecode,
    wd_oh: DFF<Bits<16>>,
    wd_code: DFF<Bits<5>>,
    wd_ok: DFF<Bit>,
    wd_db: DFF<Bit>,
    wd_kind: DFF<Bits<2>>,
    wd_index: DFF<Bits<24>>,
    oplut: Lut8<1>,
    b_valid: DFF<Bit>,
    b_resp: DFF<Bits<2>>,
    // registers in byte lanes (a byte strobe is a clock enable: no merge logic)
    mac_lo: [DFF<Bits<8>>; 4],
    mac_hi: [DFF<Bits<8>>; 2],
    ip: [DFF<Bits<8>>; 4],
    arp_q: [DFF<Bits<8>>; 4],
    arp_p: DFF<Bit>,
    cmd_b: [DFF<Bits<8>>; 64],
    // command
    busy: DFF<Bit>,
    c_valid: DFF<Bit>,
    c_op: DFF<Bits<8>>,
    c_index: DFF<Bits<24>>,
    c_data: DFF<Bits<512>>,
    last_err: DFF<Bits<8>>,
    count: DFF<Bits<16>>,
    fin: DFF<Bit>,
    fin_err: DFF<Bits<8>>,
    rej: DFF<Bit>,
    // doorbells
    dbq: Fifo<Bits<42>, 4, 5>,
    // read
    rd_busy: DFF<Bit>,
    ar_addr: DFF<Bits<20>>,
    r1: DFF<Bit>,
    r2: DFF<Bit>,
    r3: DFF<Bit>,
    r4: DFF<Bit>,
    ard: AddrDecode,
    rd_code: DFF<Bits<5>>,
    rd_ok: DFF<Bit>,
    rd_ctr: DFF<Bit>,
    ctr_idx: DFF<Bits<6>>,
    rd_pre: DFF<Bits<32>>,
    r_valid: DFF<Bit>,
    r_data: DFF<Bits<32>>,
    r_resp: DFF<Bits<2>>,
    // locals
    exec: Signal<Local, Bit>,
    mac_lo_w: Signal<Local, Bits<32>>,
    mac_hi_w: Signal<Local, Bits<32>>,
    ip_w: Signal<Local, Bits<32>>,
    arp_q_w: Signal<Local, Bits<32>>,
    arp_hi_w: Signal<Local, Bits<32>>,
    cw: [Signal<Local, Bits<32>>; 16],
    staged: Signal<Local, Bits<512>>,
    status: Signal<Local, Bits<32>>,
    cmdword: Signal<Local, Bits<32>>,
    dbo: Signal<Local, Bits<42>>,
    // constants
    k_id: Constant<Bits<32>>,
    k_version: Constant<Bits<32>>,
    k_caps: Constant<Bits<32>>,
    k_sizes: Constant<Bits<32>>,
    k_sel_mac_lo: Constant<Bits<5>>,
    k_sel_mac_hi: Constant<Bits<5>>,
    k_sel_ipv4: Constant<Bits<5>>,
    k_sel_arp: Constant<Bits<5>>,
    k_sel_cmd: Constant<Bits<5>>,
    k_sel_ctr: Constant<Bits<5>>,
    k_err_bad_op: Constant<Bits<8>>,
    k_err_busy: Constant<Bits<8>>,
    k_okay: Constant<Bits<2>>,
    k_slverr: Constant<Bits<2>>,
    k_zero32: Constant<Bits<32>>,
    k_one32: Constant<Bits<32>>,
    k_one16: Constant<Bits<16>>,
}

impl Default for Csr {
    /// CAPS 0 (the top sets it), 256 QPs, 1,024 MR entries, 256 CQs, path MTU up to 4096 (enum 5).
    fn default() -> Self {
        Self::new(0, 8, 10, 8, 5)
    }
}

impl Csr {
    /// `caps`: the `CAP_*` bits; `SIZES` fields: log2 QPs, log2 MR entries, log2 CQs, largest MTU enum.
    pub fn new(caps: u32, log2_qps: u32, log2_mrs: u32, log2_cqs: u32, mtu: u32) -> Self {
        assert!(log2_qps < 256 && log2_mrs < 256 && log2_cqs < 256 && mtu < 256);
        let sizes = log2_qps | log2_mrs << 8 | log2_cqs << 16 | mtu << 24;
        let mut ops = vec![0u64; 256];
        for op in COMMAND_OPS {
            ops[op as usize] = 1;
        }
        // the read mux's literal arms (see `update`) follow these codes
        assert_eq!(
            [SEL_ID, SEL_VERSION, SEL_CAPS, SEL_SIZES, SEL_MAC_LO, SEL_MAC_HI, SEL_IPV4, SEL_CMD, SEL_STATUS, SEL_ARP_QUERY, SEL_ARP_MAC_LO, SEL_ARP_MAC_HI],
            [16, 17, 18, 19, 20, 21, 22, 23, 24, 26, 27, 28]
        );
        Self {
            clock: Default::default(),
            awvalid: Default::default(),
            awready: Default::default(),
            awaddr: Default::default(),
            wvalid: Default::default(),
            wready: Default::default(),
            wdata: Default::default(),
            wstrb: Default::default(),
            bvalid: Default::default(),
            bready: Default::default(),
            bresp: Default::default(),
            arvalid: Default::default(),
            arready: Default::default(),
            araddr: Default::default(),
            rvalid: Default::default(),
            rready: Default::default(),
            rdata: Default::default(),
            rresp: Default::default(),
            mac: Default::default(),
            ipv4: Default::default(),
            arp_query: Default::default(),
            arp_go: Default::default(),
            arp_mac: Default::default(),
            arp_valid: Default::default(),
            cmd_valid: Default::default(),
            cmd_ready: Default::default(),
            cmd_op: Default::default(),
            cmd_index: Default::default(),
            cmd_data: Default::default(),
            cmd_done: Default::default(),
            cmd_err: Default::default(),
            db_valid: Default::default(),
            db_ready: Default::default(),
            db_kind: Default::default(),
            db_index: Default::default(),
            db_value: Default::default(),
            ctr_index: Default::default(),
            ctr_value: Default::default(),
            aw_full: Default::default(),
            aw_addr: Default::default(),
            aw_dv: Default::default(),
            w_full: Default::default(),
            w_data: Default::default(),
            w_strb: Default::default(),
            w_dv: Default::default(),
            w_opok: Default::default(),
            awd: AddrDecode::new(log2_qps, log2_cqs),
            wd_oh: Default::default(),
            wd_code: Default::default(),
            wd_ok: Default::default(),
            wd_db: Default::default(),
            wd_kind: Default::default(),
            wd_index: Default::default(),
            oplut: Lut8::new(ops),
            b_valid: Default::default(),
            b_resp: Default::default(),
            mac_lo: Default::default(),
            mac_hi: Default::default(),
            ip: Default::default(),
            arp_q: Default::default(),
            arp_p: Default::default(),
            cmd_b: std::array::from_fn(|_| Default::default()),
            busy: Default::default(),
            c_valid: Default::default(),
            c_op: Default::default(),
            c_index: Default::default(),
            c_data: Default::default(),
            last_err: Default::default(),
            count: Default::default(),
            fin: Default::default(),
            fin_err: Default::default(),
            rej: Default::default(),
            dbq: Default::default(),
            rd_busy: Default::default(),
            ar_addr: Default::default(),
            r1: Default::default(),
            r2: Default::default(),
            r3: Default::default(),
            r4: Default::default(),
            ard: AddrDecode::new(log2_qps, log2_cqs),
            rd_code: Default::default(),
            rd_ok: Default::default(),
            rd_ctr: Default::default(),
            ctr_idx: Default::default(),
            rd_pre: Default::default(),
            r_valid: Default::default(),
            r_data: Default::default(),
            r_resp: Default::default(),
            exec: Default::default(),
            mac_lo_w: Default::default(),
            mac_hi_w: Default::default(),
            ip_w: Default::default(),
            arp_q_w: Default::default(),
            arp_hi_w: Default::default(),
            cw: std::array::from_fn(|_| Default::default()),
            staged: Default::default(),
            status: Default::default(),
            cmdword: Default::default(),
            dbo: Default::default(),
            k_id: k(u64::from(ID_VALUE)),
            k_version: k(u64::from(VERSION_VALUE)),
            k_caps: k(u64::from(caps)),
            k_sizes: k(u64::from(sizes)),
            k_sel_mac_lo: k(SEL_MAC_LO),
            k_sel_mac_hi: k(SEL_MAC_HI),
            k_sel_ipv4: k(SEL_IPV4),
            k_sel_arp: k(SEL_ARP_QUERY),
            k_sel_cmd: k(SEL_CMD),
            k_sel_ctr: k(SEL_COUNTER),
            k_err_bad_op: k(u64::from(CMD_ERR_BAD_OP)),
            k_err_busy: k(u64::from(CMD_ERR_BUSY)),
            k_okay: k(RESP_OKAY),
            k_slverr: k(RESP_SLVERR),
            k_zero32: k(0),
            k_one32: k(1),
            k_one16: k(1),
        }
    }
}

impl Logic for Csr {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self, clock, aw_full, aw_addr, aw_dv, w_full, w_data, w_strb, w_dv, w_opok, wd_oh, wd_code, wd_ok, wd_db,
            wd_kind, wd_index, b_valid, b_resp, busy, c_valid, c_op, c_index, c_data, last_err, count, fin, fin_err,
            rej, arp_p, rd_busy, ar_addr, r1, r2, r3, r4, rd_code, rd_ok, rd_ctr, ctr_idx, rd_pre, r_valid, r_data, r_resp
        );
        clock!(self, clock, dbq);
        for i in 0..64 {
            self.cmd_b[i].clock.next = self.clock.val();
            self.cmd_b[i].d.next = self.cmd_b[i].q.val();
        }
        for i in 0..4 {
            self.mac_lo[i].clock.next = self.clock.val();
            self.mac_lo[i].d.next = self.mac_lo[i].q.val();
            self.ip[i].clock.next = self.clock.val();
            self.ip[i].d.next = self.ip[i].q.val();
            self.arp_q[i].clock.next = self.clock.val();
            self.arp_q[i].d.next = self.arp_q[i].q.val();
        }
        for i in 0..2 {
            self.mac_hi[i].clock.next = self.clock.val();
            self.mac_hi[i].d.next = self.mac_hi[i].q.val();
        }

        // ---------------- write channel ----------------
        self.awready.next = !self.aw_full.q.val();
        self.wready.next = !self.w_full.q.val();
        self.bvalid.next = self.b_valid.q.val();
        self.bresp.next = self.b_resp.q.val();
        if self.awvalid.val() & !self.aw_full.q.val() {
            self.aw_full.d.next = true;
            self.aw_addr.d.next = self.awaddr.val();
        }
        if self.wvalid.val() & !self.w_full.q.val() {
            self.w_full.d.next = true;
            self.w_data.d.next = self.wdata.val();
            self.w_strb.d.next = self.wstrb.val();
        }
        // decode (a cycle after the handshake; the held address does not change)
        self.awd.addr.next = self.aw_addr.q.val();
        self.wd_oh.d.next = self.awd.oh.val();
        self.wd_code.d.next = self.awd.code.val();
        self.wd_ok.d.next = self.awd.ok.val();
        self.wd_db.d.next = self.awd.is_db.val();
        self.wd_kind.d.next = self.awd.kind.val();
        self.wd_index.d.next = self.awd.index.val();
        self.oplut.x.next = self.w_data.q.val().get_bits::<8>(0);
        self.w_opok.d.next = self.oplut.y.val().any();
        // execute: address decoded, data held, B free, and room for a doorbell
        self.exec.next = self.aw_dv.q.val()
            & self.w_dv.q.val()
            & !self.b_valid.q.val()
            & !(self.wd_db.q.val() & self.dbq.full.val());
        self.aw_dv.d.next = self.aw_full.q.val() & !self.exec.val();
        self.w_dv.d.next = self.w_full.q.val() & !self.exec.val();
        if self.b_valid.q.val() & self.bready.val() {
            self.b_valid.d.next = false;
        }
        if self.exec.val() {
            self.aw_full.d.next = false;
            self.w_full.d.next = false;
            self.b_valid.d.next = true;
            if self.wd_ok.q.val() {
                self.b_resp.d.next = self.k_okay.val();
            } else {
                self.b_resp.d.next = self.k_slverr.val();
            }
        }
        for b in 0..4 {
            if self.exec.val() & self.w_strb.q.val().get_bit(b) {
                if self.wd_code.q.val() == self.k_sel_mac_lo.val() {
                    self.mac_lo[b].d.next = self.w_data.q.val().get_bits::<8>(8 * b);
                }
                if self.wd_code.q.val() == self.k_sel_ipv4.val() {
                    self.ip[b].d.next = self.w_data.q.val().get_bits::<8>(8 * b);
                }
                if self.wd_code.q.val() == self.k_sel_arp.val() {
                    self.arp_q[b].d.next = self.w_data.q.val().get_bits::<8>(8 * b);
                }
            }
        }
        for b in 0..2 {
            if self.exec.val() & self.w_strb.q.val().get_bit(b) & (self.wd_code.q.val() == self.k_sel_mac_hi.val()) {
                self.mac_hi[b].d.next = self.w_data.q.val().get_bits::<8>(8 * b);
            }
        }
        for i in 0..16 {
            for b in 0..4 {
                if self.exec.val() & self.wd_oh.q.val().get_bit(i) & self.w_strb.q.val().get_bit(b) {
                    self.cmd_b[4 * i + b].d.next = self.w_data.q.val().get_bits::<8>(8 * b);
                }
            }
        }
        // the words (bit_cast's width is evaluated in Rust, so no loop variable inside it: written out)
        self.cw[0].next = (bit_cast::<32, 8>(self.cmd_b[3].q.val()) << 24)
            | (bit_cast::<32, 8>(self.cmd_b[2].q.val()) << 16)
            | (bit_cast::<32, 8>(self.cmd_b[1].q.val()) << 8)
            | bit_cast::<32, 8>(self.cmd_b[0].q.val());
        self.cw[1].next = (bit_cast::<32, 8>(self.cmd_b[7].q.val()) << 24)
            | (bit_cast::<32, 8>(self.cmd_b[6].q.val()) << 16)
            | (bit_cast::<32, 8>(self.cmd_b[5].q.val()) << 8)
            | bit_cast::<32, 8>(self.cmd_b[4].q.val());
        self.cw[2].next = (bit_cast::<32, 8>(self.cmd_b[11].q.val()) << 24)
            | (bit_cast::<32, 8>(self.cmd_b[10].q.val()) << 16)
            | (bit_cast::<32, 8>(self.cmd_b[9].q.val()) << 8)
            | bit_cast::<32, 8>(self.cmd_b[8].q.val());
        self.cw[3].next = (bit_cast::<32, 8>(self.cmd_b[15].q.val()) << 24)
            | (bit_cast::<32, 8>(self.cmd_b[14].q.val()) << 16)
            | (bit_cast::<32, 8>(self.cmd_b[13].q.val()) << 8)
            | bit_cast::<32, 8>(self.cmd_b[12].q.val());
        self.cw[4].next = (bit_cast::<32, 8>(self.cmd_b[19].q.val()) << 24)
            | (bit_cast::<32, 8>(self.cmd_b[18].q.val()) << 16)
            | (bit_cast::<32, 8>(self.cmd_b[17].q.val()) << 8)
            | bit_cast::<32, 8>(self.cmd_b[16].q.val());
        self.cw[5].next = (bit_cast::<32, 8>(self.cmd_b[23].q.val()) << 24)
            | (bit_cast::<32, 8>(self.cmd_b[22].q.val()) << 16)
            | (bit_cast::<32, 8>(self.cmd_b[21].q.val()) << 8)
            | bit_cast::<32, 8>(self.cmd_b[20].q.val());
        self.cw[6].next = (bit_cast::<32, 8>(self.cmd_b[27].q.val()) << 24)
            | (bit_cast::<32, 8>(self.cmd_b[26].q.val()) << 16)
            | (bit_cast::<32, 8>(self.cmd_b[25].q.val()) << 8)
            | bit_cast::<32, 8>(self.cmd_b[24].q.val());
        self.cw[7].next = (bit_cast::<32, 8>(self.cmd_b[31].q.val()) << 24)
            | (bit_cast::<32, 8>(self.cmd_b[30].q.val()) << 16)
            | (bit_cast::<32, 8>(self.cmd_b[29].q.val()) << 8)
            | bit_cast::<32, 8>(self.cmd_b[28].q.val());
        self.cw[8].next = (bit_cast::<32, 8>(self.cmd_b[35].q.val()) << 24)
            | (bit_cast::<32, 8>(self.cmd_b[34].q.val()) << 16)
            | (bit_cast::<32, 8>(self.cmd_b[33].q.val()) << 8)
            | bit_cast::<32, 8>(self.cmd_b[32].q.val());
        self.cw[9].next = (bit_cast::<32, 8>(self.cmd_b[39].q.val()) << 24)
            | (bit_cast::<32, 8>(self.cmd_b[38].q.val()) << 16)
            | (bit_cast::<32, 8>(self.cmd_b[37].q.val()) << 8)
            | bit_cast::<32, 8>(self.cmd_b[36].q.val());
        self.cw[10].next = (bit_cast::<32, 8>(self.cmd_b[43].q.val()) << 24)
            | (bit_cast::<32, 8>(self.cmd_b[42].q.val()) << 16)
            | (bit_cast::<32, 8>(self.cmd_b[41].q.val()) << 8)
            | bit_cast::<32, 8>(self.cmd_b[40].q.val());
        self.cw[11].next = (bit_cast::<32, 8>(self.cmd_b[47].q.val()) << 24)
            | (bit_cast::<32, 8>(self.cmd_b[46].q.val()) << 16)
            | (bit_cast::<32, 8>(self.cmd_b[45].q.val()) << 8)
            | bit_cast::<32, 8>(self.cmd_b[44].q.val());
        self.cw[12].next = (bit_cast::<32, 8>(self.cmd_b[51].q.val()) << 24)
            | (bit_cast::<32, 8>(self.cmd_b[50].q.val()) << 16)
            | (bit_cast::<32, 8>(self.cmd_b[49].q.val()) << 8)
            | bit_cast::<32, 8>(self.cmd_b[48].q.val());
        self.cw[13].next = (bit_cast::<32, 8>(self.cmd_b[55].q.val()) << 24)
            | (bit_cast::<32, 8>(self.cmd_b[54].q.val()) << 16)
            | (bit_cast::<32, 8>(self.cmd_b[53].q.val()) << 8)
            | bit_cast::<32, 8>(self.cmd_b[52].q.val());
        self.cw[14].next = (bit_cast::<32, 8>(self.cmd_b[59].q.val()) << 24)
            | (bit_cast::<32, 8>(self.cmd_b[58].q.val()) << 16)
            | (bit_cast::<32, 8>(self.cmd_b[57].q.val()) << 8)
            | bit_cast::<32, 8>(self.cmd_b[56].q.val());
        self.cw[15].next = (bit_cast::<32, 8>(self.cmd_b[63].q.val()) << 24)
            | (bit_cast::<32, 8>(self.cmd_b[62].q.val()) << 16)
            | (bit_cast::<32, 8>(self.cmd_b[61].q.val()) << 8)
            | bit_cast::<32, 8>(self.cmd_b[60].q.val());
        self.mac_lo_w.next = (bit_cast::<32, 8>(self.mac_lo[3].q.val()) << 24)
            | (bit_cast::<32, 8>(self.mac_lo[2].q.val()) << 16)
            | (bit_cast::<32, 8>(self.mac_lo[1].q.val()) << 8)
            | bit_cast::<32, 8>(self.mac_lo[0].q.val());
        self.mac_hi_w.next =
            (bit_cast::<32, 8>(self.mac_hi[1].q.val()) << 8) | bit_cast::<32, 8>(self.mac_hi[0].q.val());
        self.ip_w.next = (bit_cast::<32, 8>(self.ip[3].q.val()) << 24)
            | (bit_cast::<32, 8>(self.ip[2].q.val()) << 16)
            | (bit_cast::<32, 8>(self.ip[1].q.val()) << 8)
            | bit_cast::<32, 8>(self.ip[0].q.val());
        self.mac.next = (bit_cast::<48, 32>(self.mac_hi_w.val()) << 32) | bit_cast::<48, 32>(self.mac_lo_w.val());
        self.ipv4.next = self.ip_w.val();
        // an ARP query goes out the cycle after its write, with the address as written
        self.arp_p.d.next = self.exec.val() & (self.wd_code.q.val() == self.k_sel_arp.val()) & self.w_strb.q.val().any();
        self.arp_q_w.next = (bit_cast::<32, 8>(self.arp_q[3].q.val()) << 24)
            | (bit_cast::<32, 8>(self.arp_q[2].q.val()) << 16)
            | (bit_cast::<32, 8>(self.arp_q[1].q.val()) << 8)
            | bit_cast::<32, 8>(self.arp_q[0].q.val());
        self.arp_query.next = self.arp_q_w.val();
        self.arp_go.next = self.arp_p.q.val();
        self.arp_hi_w.next = bit_cast::<32, 16>(self.arp_mac.val().get_bits::<16>(32));
        if self.arp_valid.val() {
            self.arp_hi_w.next = self.arp_hi_w.val() | (self.k_one32.val() << 31);
        }

        // ---------------- table commands ----------------
        self.staged.next = bit_cast::<512, 32>(self.cw[0].val())
            | (bit_cast::<512, 32>(self.cw[1].val()) << 32)
            | (bit_cast::<512, 32>(self.cw[2].val()) << 64)
            | (bit_cast::<512, 32>(self.cw[3].val()) << 96)
            | (bit_cast::<512, 32>(self.cw[4].val()) << 128)
            | (bit_cast::<512, 32>(self.cw[5].val()) << 160)
            | (bit_cast::<512, 32>(self.cw[6].val()) << 192)
            | (bit_cast::<512, 32>(self.cw[7].val()) << 224)
            | (bit_cast::<512, 32>(self.cw[8].val()) << 256)
            | (bit_cast::<512, 32>(self.cw[9].val()) << 288)
            | (bit_cast::<512, 32>(self.cw[10].val()) << 320)
            | (bit_cast::<512, 32>(self.cw[11].val()) << 352)
            | (bit_cast::<512, 32>(self.cw[12].val()) << 384)
            | (bit_cast::<512, 32>(self.cw[13].val()) << 416)
            | (bit_cast::<512, 32>(self.cw[14].val()) << 448)
            | (bit_cast::<512, 32>(self.cw[15].val()) << 480);
        // events, applied one cycle later so that busy, error and count change together
        self.fin.d.next = false;
        self.rej.d.next = false;
        self.fin_err.d.next = self.k_err_bad_op.val();
        if self.busy.q.val() & self.cmd_done.val() & !self.fin.q.val() {
            self.fin.d.next = true;
            self.fin_err.d.next = self.cmd_err.val();
        }
        if self.fin.q.val() {
            self.busy.d.next = false;
            self.last_err.d.next = self.fin_err.q.val();
            self.count.d.next = self.count.q.val() + self.k_one16.val();
        }
        if self.rej.q.val() {
            self.last_err.d.next = self.k_err_busy.val();
        }
        if self.c_valid.q.val() & (self.cmd_ready.val() | self.cmd_done.val()) {
            self.c_valid.d.next = false;
        }
        if self.exec.val() & (self.wd_code.q.val() == self.k_sel_cmd.val()) {
            if self.busy.q.val() {
                self.rej.d.next = true;
            } else {
                self.c_op.d.next = self.w_data.q.val().get_bits::<8>(0);
                self.c_index.d.next = self.w_data.q.val().get_bits::<24>(8);
                if self.w_opok.q.val() {
                    self.busy.d.next = true;
                    self.c_valid.d.next = true;
                    self.c_data.d.next = self.staged.val();
                } else {
                    self.fin.d.next = true;
                }
            }
        }
        self.cmd_valid.next = self.c_valid.q.val();
        self.cmd_op.next = self.c_op.q.val();
        self.cmd_index.next = self.c_index.q.val();
        self.cmd_data.next = self.c_data.q.val();
        self.status.next =
            (bit_cast::<32, 16>(self.count.q.val()) << 16) | (bit_cast::<32, 8>(self.last_err.q.val()) << 8);
        if self.busy.q.val() {
            self.status.next = self.status.val() | self.k_one32.val();
        }
        self.cmdword.next = (bit_cast::<32, 24>(self.c_index.q.val()) << 8) | bit_cast::<32, 8>(self.c_op.q.val());

        // ---------------- doorbells ----------------
        self.dbq.din.next = (bit_cast::<42, 2>(self.wd_kind.q.val()) << 40)
            | (bit_cast::<42, 24>(self.wd_index.q.val()) << 16)
            | bit_cast::<42, 16>(self.w_data.q.val().get_bits::<16>(0));
        self.dbq.push.next = self.exec.val() & self.wd_db.q.val();
        self.dbq.pop.next = self.db_ready.val();
        self.dbo.next = self.dbq.dout.val();
        self.db_valid.next = !self.dbq.empty.val();
        self.db_kind.next = self.dbo.val().get_bits::<2>(40);
        self.db_index.next = self.dbo.val().get_bits::<24>(16);
        self.db_value.next = self.dbo.val().get_bits::<16>(0);

        // ---------------- read channel ----------------
        self.arready.next = !self.rd_busy.q.val();
        self.rvalid.next = self.r_valid.q.val();
        self.rdata.next = self.r_data.q.val();
        self.rresp.next = self.r_resp.q.val();
        self.r1.d.next = false;
        self.r2.d.next = self.r1.q.val();
        self.r3.d.next = self.r2.q.val();
        self.r4.d.next = self.r3.q.val();
        if self.arvalid.val() & !self.rd_busy.q.val() {
            self.rd_busy.d.next = true;
            self.ar_addr.d.next = self.araddr.val();
            self.r1.d.next = true;
        }
        // r1: decode
        self.ard.addr.next = self.ar_addr.q.val();
        self.rd_code.d.next = self.ard.code.val();
        self.rd_ok.d.next = self.ard.ok.val();
        self.rd_ctr.d.next = self.ard.code.val() == self.k_sel_ctr.val();
        self.ctr_idx.d.next = self.ard.ctr_idx.val();
        self.ctr_index.next = self.ctr_idx.q.val();
        // r2 (and on): the register mux
        match self.rd_code.q.val().index() {
            0 => self.rd_pre.d.next = self.cw[0].val(),
            1 => self.rd_pre.d.next = self.cw[1].val(),
            2 => self.rd_pre.d.next = self.cw[2].val(),
            3 => self.rd_pre.d.next = self.cw[3].val(),
            4 => self.rd_pre.d.next = self.cw[4].val(),
            5 => self.rd_pre.d.next = self.cw[5].val(),
            6 => self.rd_pre.d.next = self.cw[6].val(),
            7 => self.rd_pre.d.next = self.cw[7].val(),
            8 => self.rd_pre.d.next = self.cw[8].val(),
            9 => self.rd_pre.d.next = self.cw[9].val(),
            10 => self.rd_pre.d.next = self.cw[10].val(),
            11 => self.rd_pre.d.next = self.cw[11].val(),
            12 => self.rd_pre.d.next = self.cw[12].val(),
            13 => self.rd_pre.d.next = self.cw[13].val(),
            14 => self.rd_pre.d.next = self.cw[14].val(),
            15 => self.rd_pre.d.next = self.cw[15].val(),
            16 => self.rd_pre.d.next = self.k_id.val(),
            17 => self.rd_pre.d.next = self.k_version.val(),
            18 => self.rd_pre.d.next = self.k_caps.val(),
            19 => self.rd_pre.d.next = self.k_sizes.val(),
            20 => self.rd_pre.d.next = self.mac_lo_w.val(),
            21 => self.rd_pre.d.next = self.mac_hi_w.val(),
            22 => self.rd_pre.d.next = self.ip_w.val(),
            23 => self.rd_pre.d.next = self.cmdword.val(),
            24 => self.rd_pre.d.next = self.status.val(),
            26 => self.rd_pre.d.next = self.arp_q_w.val(),
            27 => self.rd_pre.d.next = self.arp_mac.val().get_bits::<32>(0),
            28 => self.rd_pre.d.next = self.arp_hi_w.val(),
            _ => self.rd_pre.d.next = self.k_zero32.val(),
        }
        // r4: CTR_LATENCY cycles after ctr_index changed (at r2), sample the counter; respond
        if self.r4.q.val() {
            self.r_valid.d.next = true;
            if self.rd_ctr.q.val() {
                self.r_data.d.next = self.ctr_value.val();
            } else {
                self.r_data.d.next = self.rd_pre.q.val();
            }
            if self.rd_ok.q.val() {
                self.r_resp.d.next = self.k_okay.val();
            } else {
                self.r_resp.d.next = self.k_slverr.val();
            }
        }
        if self.r_valid.q.val() & self.rready.val() {
            self.r_valid.d.next = false;
            self.rd_busy.d.next = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::seq::SliceRandom;
    use rand::{Rng, SeedableRng};
    use std::collections::HashMap;
    use rnic_driver::host::*;

    const OKAY: u8 = RESP_OKAY as u8;
    const SLVERR: u8 = RESP_SLVERR as u8;
    const SQ: u64 = DB_KIND_SQ;
    const RQ: u64 = DB_KIND_RQ;
    const CQ: u64 = DB_KIND_CQ;

    /// Master timing of one transaction: awvalid (arvalid) from `aw` cycles after the start, wvalid from `w`
    /// cycles after, bready (rready) `b` cycles after bvalid (rvalid) rose; `b == 0`: ready all along,
    /// before valid too.
    #[derive(Clone, Copy, Debug)]
    struct Timing {
        aw: u64,
        w: u64,
        b: u64,
    }

    struct Wr {
        addr: u32,
        data: u32,
        strb: u8,
        t: Timing,
        start: u64,
        aw_done: bool,
        w_done: bool,
        b_since: Option<u64>,
        resp: Option<u8>,
    }

    struct Rd {
        addr: u32,
        t: Timing,
        start: u64,
        ar_done: bool,
        r_since: Option<u64>,
        resp: Option<(u8, u32)>,
    }

    #[derive(Clone, Copy, PartialEq)]
    enum Sink {
        Hold,
        Always,
        Random,
    }

    #[derive(Clone, Debug, PartialEq)]
    struct Cmd {
        op: u8,
        index: u32,
        data: [u32; 16],
    }

    /// Direct-drive testbench: an AXI4-Lite master (one write and one read at a time, each with its own
    /// timing), a doorbell sink, a table owner and a counter owner with 2 register stages (index -> counter
    /// -> value), all checking the slave's side of every protocol each cycle.
    struct Tb {
        u: Box<Csr>,
        cycle: u64,
        rng: SmallRng,
        wr: Option<Wr>,
        rd: Option<Rd>,
        sink: Sink,
        dbs: Vec<(u64, u32, u16)>,
        // table owner: takes a command `ready_delay` cycles after cmd_valid rose, pulses cmd_done
        // `done_delay` cycles after taking it (None: when `finish` is set), with `err`
        ready_delay: u64,
        done_delay: Option<u64>,
        finish: bool,
        err: u8,
        valid_since: Option<u64>,
        taken_at: Option<u64>,
        held: Option<Cmd>,
        cmds: Vec<Cmd>,
        // counter owner
        counters: [u32; COUNTERS],
        c1: u32,
        c2: u32,
        // B/R stability
        last_b: Option<u8>,
        last_r: Option<(u8, u32)>,
        // ARP: the queries pulsed (arp_query with arp_go)
        arp_gos: Vec<u32>,
    }

    impl Tb {
        fn new(u: Csr, seed: u64) -> Self {
            let mut u = Box::new(u);
            u.connect_all();
            let mut rng = SmallRng::seed_from_u64(seed);
            let counters = std::array::from_fn(|_| rng.gen());
            let mut tb = Tb {
                u,
                cycle: 0,
                rng,
                wr: None,
                rd: None,
                sink: Sink::Always,
                dbs: Vec::new(),
                arp_gos: Vec::new(),
                ready_delay: 0,
                done_delay: Some(0),
                finish: false,
                err: CMD_ERR_NONE,
                valid_since: None,
                taken_at: None,
                held: None,
                cmds: Vec::new(),
                counters,
                c1: 0,
                c2: 0,
                last_b: None,
                last_r: None,
            };
            tb.u.clock.next = true.into();
            assert!(simulate(&mut *tb.u, 100));
            tb
        }

        fn cmd_out(&self) -> Cmd {
            let d = self.u.cmd_data.val();
            Cmd {
                op: self.u.cmd_op.val().to_u64() as u8,
                index: self.u.cmd_index.val().to_u64() as u32,
                data: std::array::from_fn(|i| d.get_bits::<32>(32 * i).to_u64() as u32),
            }
        }

        fn step(&mut self) {
            let c = self.cycle;
            // ---- drive (from registered outputs and the master's state)
            let junk: u32 = self.rng.gen::<u32>() & 0xF_FFFF;
            let (mut awv, mut wv, mut br) = (false, false, self.rng.gen());
            let (mut awa, mut wd, mut ws) = (junk, self.rng.gen::<u32>(), self.rng.gen::<u8>() & 0xF);
            if let Some(w) = &self.wr {
                awv = !w.aw_done && c >= w.start + w.t.aw;
                wv = !w.w_done && c >= w.start + w.t.w;
                br = w.t.b == 0 || w.b_since.map_or(false, |s| c >= s + w.t.b);
                if awv {
                    awa = w.addr;
                }
                if wv {
                    wd = w.data;
                    ws = w.strb;
                }
            }
            let (mut arv, mut rr, mut ara) = (false, self.rng.gen(), junk ^ 0x5_5555);
            if let Some(r) = &self.rd {
                arv = !r.ar_done && c >= r.start + r.t.aw;
                rr = r.t.b == 0 || r.r_since.map_or(false, |s| c >= s + r.t.b);
                if arv {
                    ara = r.addr;
                }
            }
            let dbr = match self.sink {
                Sink::Hold => false,
                Sink::Always => true,
                Sink::Random => self.rng.gen_ratio(2, 5),
            };
            let cv = self.u.cmd_valid.val();
            if cv {
                assert!(self.taken_at.is_none(), "cycle {c}: cmd_valid again before cmd_done");
                if self.valid_since.is_none() {
                    self.valid_since = Some(c);
                    self.held = Some(self.cmd_out());
                }
            }
            let cready = cv && c >= self.valid_since.unwrap() + self.ready_delay;
            let taken = if cready { Some(c) } else { self.taken_at };
            let cdone = taken.map_or(false, |t| match self.done_delay {
                Some(d) => c >= t + d,
                None => self.finish,
            });
            let u = &mut self.u;
            u.awvalid.next = awv;
            u.awaddr.next = bits(awa as u64);
            u.wvalid.next = wv;
            u.wdata.next = bits(wd as u64);
            u.wstrb.next = bits(ws as u64);
            u.bready.next = br;
            u.arvalid.next = arv;
            u.araddr.next = bits(ara as u64);
            u.rready.next = rr;
            u.db_ready.next = dbr;
            u.cmd_ready.next = cready;
            u.cmd_done.next = cdone;
            u.cmd_err.next = bits(if cdone { self.err as u64 } else { 0xEE });
            u.ctr_value.next = bits(self.c2 as u64);
            u.clock.next = false.into();
            assert!(simulate(&mut **u, 100));

            // ---- observe
            let (awr, wr_, bv, bresp) = (u.awready.val(), u.wready.val(), u.bvalid.val(), u.bresp.val().to_u64() as u8);
            let (arr, rv, rresp, rdata) =
                (u.arready.val(), u.rvalid.val(), u.rresp.val().to_u64() as u8, u.rdata.val().to_u64() as u32);
            if bv {
                let w = self.wr.as_mut().unwrap_or_else(|| panic!("cycle {c}: bvalid with no write"));
                assert!(w.aw_done && w.w_done, "cycle {c}: bvalid before both aw and w");
                if let Some(p) = self.last_b {
                    assert_eq!(p, bresp, "cycle {c}: bresp changed while bvalid");
                }
                w.b_since.get_or_insert(c);
                if br {
                    assert!(w.resp.is_none());
                    w.resp = Some(bresp);
                    self.last_b = None;
                } else {
                    self.last_b = Some(bresp);
                }
            } else {
                assert!(self.last_b.is_none(), "cycle {c}: bvalid dropped without bready");
            }
            if let Some(w) = self.wr.as_mut() {
                w.aw_done |= awv && awr;
                w.w_done |= wv && wr_;
            }
            if rv {
                let r = self.rd.as_mut().unwrap_or_else(|| panic!("cycle {c}: rvalid with no read"));
                assert!(r.ar_done, "cycle {c}: rvalid before ar");
                if let Some(p) = self.last_r {
                    assert_eq!(p, (rresp, rdata), "cycle {c}: R changed while rvalid");
                }
                r.r_since.get_or_insert(c);
                if rr {
                    assert!(r.resp.is_none());
                    r.resp = Some((rresp, rdata));
                    self.last_r = None;
                } else {
                    self.last_r = Some((rresp, rdata));
                }
            } else {
                assert!(self.last_r.is_none(), "cycle {c}: rvalid dropped without rready");
            }
            if let Some(r) = self.rd.as_mut() {
                r.ar_done |= arv && arr;
            }
            if u.db_valid.val() && dbr {
                self.dbs.push((
                    u.db_kind.val().to_u64(),
                    u.db_index.val().to_u64() as u32,
                    u.db_value.val().to_u64() as u16,
                ));
            }
            if let Some(h) = &self.held {
                // op, index and data stay put from cmd_valid until cmd_done
                assert_eq!(&self.cmd_out(), h, "cycle {c}: command changed while busy");
            }
            if cready {
                self.cmds.push(self.held.clone().unwrap());
                self.taken_at = Some(c);
            }
            if cdone {
                self.taken_at = None;
                self.valid_since = None;
                self.held = None;
                self.finish = false;
            }
            if self.u.arp_go.val() {
                self.arp_gos.push(self.u.arp_query.val().to_u64() as u32);
            }
            let idx = self.u.ctr_index.val().to_u64() as usize;

            // ---- clock edge
            self.u.clock.next = true.into();
            assert!(simulate(&mut *self.u, 100));
            self.c2 = self.c1;
            self.c1 = self.counters[idx];
            self.cycle += 1;
        }

        fn run(&mut self, n: usize) {
            for _ in 0..n {
                self.step();
            }
        }

        fn run_until(&mut self, what: &str, f: impl Fn(&Tb) -> bool) {
            for _ in 0..1000 {
                if f(self) {
                    return;
                }
                self.step();
            }
            panic!("cycle {}: hung waiting for {what}", self.cycle);
        }

        fn timing(&mut self) -> Timing {
            let mut d = || if self.rng.gen_ratio(1, 2) { 0 } else { self.rng.gen_range(1..6) };
            Timing { aw: d(), w: d(), b: d() }
        }

        fn start_write(&mut self, addr: u32, data: u32, strb: u8, t: Timing) {
            assert!(self.wr.is_none());
            let start = self.cycle;
            self.wr = Some(Wr { addr, data, strb, t, start, aw_done: false, w_done: false, b_since: None, resp: None });
        }

        fn start_read(&mut self, addr: u32, t: Timing) {
            assert!(self.rd.is_none());
            let start = self.cycle;
            self.rd = Some(Rd { addr, t, start, ar_done: false, r_since: None, resp: None });
        }

        fn finish_write(&mut self) -> u8 {
            self.run_until("B", |tb| tb.wr.as_ref().unwrap().resp.is_some());
            self.wr.take().unwrap().resp.unwrap()
        }

        fn finish_read(&mut self) -> (u8, u32) {
            self.run_until("R", |tb| tb.rd.as_ref().unwrap().resp.is_some());
            self.rd.take().unwrap().resp.unwrap()
        }

        fn write_t(&mut self, addr: u32, data: u32, strb: u8, t: Timing) -> u8 {
            self.start_write(addr, data, strb, t);
            self.finish_write()
        }

        fn write(&mut self, addr: u32, data: u32) -> u8 {
            let t = self.timing();
            self.write_t(addr, data, 0xF, t)
        }

        fn read_t(&mut self, addr: u32, t: Timing) -> (u8, u32) {
            self.start_read(addr, t);
            self.finish_read()
        }

        fn read(&mut self, addr: u32) -> (u8, u32) {
            let t = self.timing();
            self.read_t(addr, t)
        }

        fn status(&mut self) -> (bool, u8, u16) {
            let (r, s) = self.read(REG_CMD_STATUS);
            assert_eq!(r, OKAY);
            (s & 1 == 1, (s >> 8) as u8, (s >> 16) as u16)
        }
    }

    fn sizes(q: u32, m: u32, c: u32, mtu: u32) -> u32 {
        q | m << 8 | c << 16 | mtu << 24
    }

    const UNMAPPED: [u32; 14] =
        [0x28, 0x30, 0x3C, 0x88, 0xFC, 0x200, 0x3FC, 0x400, 0x8000, 0xFFFC, 0x1_1000, 0x2_0004, 0x3_0000, 0xF_FFFC];

    /// ARP_QUERY: each write pulses `arp_go` once with the address as written (strobes honoured) and reads
    /// back; ARP_MAC_LO/HI show `arp_mac` with `arp_valid` in bit 31; the answer registers are read-only.
    #[test]
    fn arp_query_and_answer_registers() {
        let mut tb = Tb::new(Csr::default(), 3);
        assert_eq!(tb.write(REG_ARP_QUERY, 0x0A00_0001), OKAY);
        tb.run(3);
        assert_eq!(tb.arp_gos, vec![0x0A00_0001], "one pulse per write");
        assert_eq!(tb.read(REG_ARP_QUERY), (OKAY, 0x0A00_0001));
        assert_eq!(tb.write_t(REG_ARP_QUERY, 0xFFFF_FF07, 0b0001, Timing { aw: 2, w: 0, b: 1 }), OKAY);
        tb.run(3);
        assert_eq!(tb.arp_gos, vec![0x0A00_0001, 0x0A00_0007], "the byte strobes apply before the pulse");
        assert_eq!(tb.write_t(REG_ARP_QUERY, 0x1234_5678, 0, Timing { aw: 0, w: 0, b: 0 }), OKAY);
        tb.run(3);
        assert_eq!(tb.arp_gos.len(), 2, "a write with no strobe asks nothing");
        tb.u.arp_mac.next = bits(0x5254_0012_3456);
        tb.u.arp_valid.next = false;
        assert_eq!(tb.read(REG_ARP_MAC_HI), (OKAY, 0x5254));
        assert_eq!(tb.read(REG_ARP_MAC_LO), (OKAY, 0x0012_3456));
        tb.u.arp_valid.next = true;
        assert_eq!(tb.read(REG_ARP_MAC_HI), (OKAY, 0x5254 | ARP_VALID));
        assert_eq!(tb.write(REG_ARP_MAC_HI, 0), OKAY);
        assert_eq!(tb.read(REG_ARP_MAC_HI), (OKAY, 0x5254 | ARP_VALID), "read-only");
        assert_eq!(tb.arp_gos.len(), 2);
    }

    #[test]
    fn registers_read_as_the_host_map_in_every_handshake_order() {
        let caps = CAP_RC | CAP_ATOMIC | CAP_INLINE;
        let mut tb = Tb::new(Csr::new(caps, 8, 10, 8, 5), 1);
        for (a, v) in [
            (REG_ID, ID_VALUE),
            (REG_VERSION, VERSION_VALUE),
            (REG_CAPS, caps),
            (REG_SIZES, sizes(8, 10, 8, 5)),
            (REG_MAC_LO, 0),
            (REG_IPV4, 0),
            (REG_CMD_STATUS, 0),
        ] {
            assert_eq!(tb.read(a), (OKAY, v), "register {a:#x}");
        }
        // Default: CAPS 0 and the default sizes
        let mut d = Tb::new(Csr::default(), 9);
        assert_eq!(d.read(REG_CAPS), (OKAY, 0));
        assert_eq!(d.read(REG_SIZES), (OKAY, sizes(8, 10, 8, 5)));
        assert_eq!(Tb::new(Csr::new(0, 6, 12, 4, 3), 9).read(REG_SIZES), (OKAY, sizes(6, 12, 4, 3)));

        // aw before w, w before aw, together; B and R held back or taken at once
        let mut k = 0u32;
        for (aw, w) in [(0, 0), (0, 1), (0, 6), (1, 0), (6, 0), (3, 3)] {
            for b in [0, 1, 4] {
                k += 1;
                let v = 0x1357_9BDF ^ k.wrapping_mul(0x9E37_79B9);
                assert_eq!(tb.write_t(REG_MAC_LO, v, 0xF, Timing { aw, w, b }), OKAY);
                assert_eq!(tb.read_t(REG_MAC_LO, Timing { aw: b, w: 0, b: aw }), (OKAY, v));
            }
        }
        // MAC and IPv4 to the datapath
        assert_eq!(tb.write(REG_MAC_LO, 0x0012_3456), OKAY);
        assert_eq!(tb.write(REG_MAC_HI, 0xABCD_5254), OKAY);
        assert_eq!(tb.write(REG_IPV4, 0x0A00_0002), OKAY);
        assert_eq!(tb.read(REG_MAC_HI), (OKAY, 0x5254), "MAC_HI 31:16 read 0");
        assert_eq!(tb.u.mac.val().to_u64(), 0x5254_0012_3456);
        assert_eq!(tb.u.ipv4.val().to_u64(), 0x0A00_0002);
        // byte strobes
        assert_eq!(tb.write_t(REG_IPV4, 0xAABB_CCDD, 0b0101, Timing { aw: 0, w: 2, b: 1 }), OKAY);
        assert_eq!(tb.read(REG_IPV4), (OKAY, 0x0ABB_00DD));
        assert_eq!(tb.u.ipv4.val().to_u64(), 0x0ABB_00DD);
        assert_eq!(tb.write_t(REG_MAC_HI, 0x7700_9900, 0b1010, Timing { aw: 2, w: 0, b: 0 }), OKAY);
        assert_eq!(tb.write_t(REG_MAC_LO, 0xEEFF_0000, 0b1000, Timing { aw: 0, w: 0, b: 3 }), OKAY);
        assert_eq!(tb.u.mac.val().to_u64(), 0x9954_EE12_3456);
        // address bits 1:0 are ignored
        assert_eq!(tb.read(REG_ID + 3), (OKAY, ID_VALUE));
        // the command staging window
        let words: Vec<u32> = (0..CMD_DATA_WORDS).map(|_| tb.rng.gen()).collect();
        for (i, w) in words.iter().enumerate() {
            assert_eq!(tb.write(REG_CMD_DATA + 4 * i as u32, *w), OKAY);
        }
        for (i, w) in words.iter().enumerate() {
            assert_eq!(tb.read(REG_CMD_DATA + 4 * i as u32), (OKAY, *w), "CMD_DATA[{i}]");
        }
        // read-only registers: OKAY, unchanged
        for a in [REG_ID, REG_VERSION, REG_CAPS, REG_SIZES, REG_CMD_STATUS, REG_COUNTERS + 8] {
            assert_eq!(tb.write(a, 0xFFFF_FFFF), OKAY);
        }
        assert_eq!(tb.read(REG_ID), (OKAY, ID_VALUE));
        assert_eq!(tb.read(REG_CAPS), (OKAY, caps));
        assert_eq!(tb.read(REG_CMD_STATUS), (OKAY, 0));
        // unmapped: SLVERR, reads 0, writes change nothing
        for a in UNMAPPED {
            assert_eq!(tb.read(a), (SLVERR, 0), "read {a:#x}");
            assert_eq!(tb.write(a, 0xFFFF_FFFF), SLVERR, "write {a:#x}");
        }
        assert_eq!(tb.read(REG_MAC_LO), (OKAY, 0xEE12_3456));
        assert_eq!(tb.read(REG_MAC_HI), (OKAY, 0x9954));
        assert_eq!(tb.read(REG_IPV4), (OKAY, 0x0ABB_00DD));
        for (i, w) in words.iter().enumerate() {
            assert_eq!(tb.read(REG_CMD_DATA + 4 * i as u32), (OKAY, *w), "CMD_DATA[{i}]");
        }
        assert!(tb.dbs.is_empty() && tb.cmds.is_empty());
        // a read and a write at the same time
        tb.start_write(REG_MAC_LO, 0x0102_0304, 0xF, Timing { aw: 1, w: 0, b: 2 });
        tb.start_read(REG_IPV4, Timing { aw: 0, w: 0, b: 3 });
        assert_eq!(tb.finish_read(), (OKAY, 0x0ABB_00DD));
        assert_eq!(tb.finish_write(), OKAY);
        assert_eq!(tb.read(REG_MAC_LO), (OKAY, 0x0102_0304));
    }

    #[test]
    fn random_traffic_matches_a_register_model() {
        let mut tb = Tb::new(Csr::new(CAP_RC | CAP_UD, 8, 10, 8, 5), 7);
        tb.sink = Sink::Random;
        let mut model: HashMap<u32, u32> = HashMap::new();
        let mut rw = vec![REG_MAC_LO, REG_MAC_HI, REG_IPV4];
        rw.extend((0..CMD_DATA_WORDS as u32).map(|i| REG_CMD_DATA + 4 * i));
        let ro = [
            (REG_ID, ID_VALUE),
            (REG_VERSION, VERSION_VALUE),
            (REG_CAPS, CAP_RC | CAP_UD),
            (REG_SIZES, sizes(8, 10, 8, 5)),
            (REG_CMD_STATUS, 0),
        ];
        let mut want_db = Vec::new();
        let pick = |tb: &mut Tb, rw: &[u32]| -> u32 {
            match tb.rng.gen_range(0..10) {
                0..=4 => *rw.choose(&mut tb.rng).unwrap(),
                5 => ro.choose(&mut tb.rng).unwrap().0,
                6 => *UNMAPPED.choose(&mut tb.rng).unwrap(),
                7 => REG_COUNTERS + 4 * tb.rng.gen_range(0..COUNTERS as u32),
                8 => sq_doorbell(tb.rng.gen_range(0..256)),
                _ => cq_doorbell(tb.rng.gen_range(0..300)),
            }
        };
        let expect = |model: &HashMap<u32, u32>, counters: &[u32; COUNTERS], a: u32| -> (u8, u32) {
            if let Some(v) = model.get(&a) {
                (OKAY, *v)
            } else if let Some((_, v)) = ro.iter().find(|(r, _)| *r == a) {
                (OKAY, *v)
            } else if (REG_COUNTERS..REG_COUNTERS + 4 * COUNTERS as u32).contains(&a) {
                (OKAY, counters[((a - REG_COUNTERS) / 4) as usize])
            } else if UNMAPPED.contains(&a) || a >= cq_doorbell(256) {
                (SLVERR, 0)
            } else {
                (OKAY, 0) // an in-range doorbell reads 0
            }
        };
        let apply = |model: &mut HashMap<u32, u32>, want_db: &mut Vec<(u64, u32, u16)>, a: u32, v: u32, s: u8| {
            if UNMAPPED.contains(&a) {
                SLVERR
            } else if rw.contains(&a) {
                let m = (0..4).filter(|b| s >> b & 1 == 1).fold(0u32, |m, b| m | 0xFF << (8 * b));
                let m = if a == REG_MAC_HI { m & 0xFFFF } else { m };
                let old = model.get(&a).copied().unwrap_or(0);
                model.insert(a, (old & !m) | (v & m));
                OKAY
            } else if a >= DB_BASE && a < cq_doorbell(0) {
                want_db.push((SQ, (a - DB_BASE) / DB_STRIDE, v as u16));
                OKAY
            } else if a >= cq_doorbell(0) {
                if a < cq_doorbell(256) {
                    want_db.push((CQ, (a - CQ_DB_BASE) / CQ_DB_STRIDE, v as u16));
                    OKAY
                } else {
                    SLVERR
                }
            } else {
                OKAY
            }
        };
        for a in &rw {
            model.insert(*a, 0);
        }
        let mut overlapped = 0;
        for n in 0..500 {
            for i in 0..COUNTERS {
                if tb.rng.gen_ratio(1, 8) {
                    tb.counters[i] = tb.rng.gen();
                }
            }
            let kind = tb.rng.gen_range(0..3);
            let wa = pick(&mut tb, &rw);
            let mut ra = pick(&mut tb, &rw);
            if kind == 2 && ra == wa {
                ra = REG_ID;
            }
            let (v, s): (u32, u8) = (tb.rng.gen(), if tb.rng.gen_ratio(3, 4) { 0xF } else { tb.rng.gen_range(0..16) });
            let (tw, tr) = (tb.timing(), tb.timing());
            if kind != 1 {
                tb.start_write(wa, v, s, tw);
            }
            if kind != 0 {
                // counters are sampled while the read runs; keep them still for it
                let want = expect(&model, &tb.counters, ra);
                tb.start_read(ra, tr);
                assert_eq!(tb.finish_read(), want, "transaction {n}: read {ra:#x}");
            }
            if kind != 1 {
                let want = apply(&mut model, &mut want_db, wa, v, s);
                assert_eq!(tb.finish_write(), want, "transaction {n}: write {wa:#x}");
            }
            overlapped += (kind == 2) as usize;
        }
        assert!(overlapped > 100);
        tb.run_until("doorbells drained", |tb| !tb.u.db_valid.val());
        assert!(want_db.len() > 50);
        assert_eq!(tb.dbs, want_db);
        assert_eq!(tb.u.mac.val().to_u64(), (model[&REG_MAC_HI] as u64) << 32 | model[&REG_MAC_LO] as u64);
        assert_eq!(tb.u.ipv4.val().to_u64(), model[&REG_IPV4] as u64);
    }

    fn stage(tb: &mut Tb, data: &[u32; 16]) {
        for (i, w) in data.iter().enumerate() {
            assert_eq!(tb.write(REG_CMD_DATA + 4 * i as u32, *w), OKAY);
        }
    }

    #[test]
    fn table_commands_busy_errors_and_count() {
        let mut tb = Tb::new(Csr::default(), 2);
        tb.ready_delay = 3;
        tb.done_delay = None;
        let qp = QpCmd {
            state: 3,
            path_mtu: 5,
            access: 0xE,
            dest_qpn: 0x11,
            remote_ip: 0x0A00_0001,
            remote_mac: [0x52, 0x54, 0, 0x12, 0x34, 0x56],
            send_cq: 1,
            recv_cq: 2,
            ..Default::default()
        }
        .command(0x2A);
        stage(&mut tb, &qp.data);
        assert_eq!(tb.write(REG_CMD, qp.cmd_word()), OKAY);
        // busy as soon as the B response is back
        assert_eq!(tb.status(), (true, CMD_ERR_NONE, 0));
        tb.run(5);
        assert_eq!(tb.cmds, vec![Cmd { op: qp.op, index: qp.index, data: qp.data }]);
        assert!(!tb.u.cmd_valid.val(), "cmd_valid drops at cmd_ready");
        // staging the next command while busy leaves the running one alone (checked every cycle)
        let mr = MrCmd { va: 0x7F00_0000_1000, len: 1 << 21, dma_base: 0x8000_0000, key: 0x2FA, pd: 3, access: 0xF, fast: false, mw: false, mw2: false, unbound: false }
            .command();
        stage(&mut tb, &mr.data);
        // CMD while busy: ignored, CMD_ERR_BUSY
        assert_eq!(tb.write(REG_CMD, mr.cmd_word()), OKAY);
        tb.run(20);
        assert_eq!(tb.cmds.len(), 1);
        assert_eq!(tb.status(), (true, CMD_ERR_BUSY, 0));
        assert_eq!(tb.read(REG_CMD), (OKAY, qp.cmd_word()));
        // the owner finishes, with an error
        tb.err = CMD_ERR_BAD_INDEX;
        tb.finish = true;
        tb.run(3);
        assert_eq!(tb.status(), (false, CMD_ERR_BAD_INDEX, 1));
        // ops outside the list: done at once with CMD_ERR_BAD_OP, no cmd_valid
        for (n, op) in [0u8, 11, 0x80, 0xFF].into_iter().enumerate() {
            assert_eq!(tb.write(REG_CMD, op as u32 | 0x12_3456 << 8), OKAY);
            assert_eq!(tb.status(), (false, CMD_ERR_BAD_OP, 2 + n as u16), "op {op}");
        }
        assert_eq!(tb.cmds.len(), 1);
        // the staged MR command, now that the slave is idle
        tb.done_delay = Some(2);
        tb.err = CMD_ERR_NONE;
        assert_eq!(tb.write(REG_CMD, mr.cmd_word()), OKAY);
        tb.run_until("idle", |tb| tb.held.is_none());
        assert_eq!(tb.status(), (false, CMD_ERR_NONE, 6));
        assert_eq!(tb.cmds[1], Cmd { op: mr.op, index: mr.index, data: mr.data });
        // every op of the list, owners quick and slow, done with cmd_ready or later
        let mut count = 6u16;
        for (n, op) in COMMAND_OPS.into_iter().enumerate() {
            let data: [u32; 16] = std::array::from_fn(|_| tb.rng.gen());
            let index = tb.rng.gen_range(0..1 << 24);
            stage(&mut tb, &data);
            tb.ready_delay = n as u64 % 3;
            tb.done_delay = Some([0, 1, 7][n % 3]);
            tb.err = n as u8 * 16;
            assert_eq!(tb.write(REG_CMD, op as u32 | index << 8), OKAY);
            let mut polls = 0;
            loop {
                let (busy, err, cnt) = tb.status();
                if !busy {
                    count += 1;
                    assert_eq!((err, cnt), (n as u8 * 16, count), "op {op}");
                    break;
                }
                assert_eq!(cnt, count, "the count moves with busy");
                polls += 1;
                assert!(polls < 10);
            }
            assert_eq!(tb.cmds.last().unwrap(), &Cmd { op, index, data }, "op {op}");
        }
        assert_eq!(tb.cmds.len(), 2 + COMMAND_OPS.len());
    }

    #[test]
    fn doorbells_in_order_with_a_full_fifo_holding_the_bus() {
        let mut tb = Tb::new(Csr::default(), 3);
        tb.sink = Sink::Random;
        let mut want = Vec::new();
        for (kind, idx) in [(SQ, 0), (SQ, 1), (SQ, 255), (RQ, 0), (RQ, 77), (RQ, 255), (CQ, 0), (CQ, 3), (CQ, 255)] {
            let a = match kind {
                SQ => sq_doorbell(idx),
                RQ => rq_doorbell(idx),
                _ => cq_doorbell(idx),
            };
            let v: u32 = tb.rng.gen();
            assert_eq!(tb.write(a, v), OKAY);
            want.push((kind, idx, v as u16));
        }
        // out-of-range QPN/CQN and the unused words of a stride: SLVERR, no doorbell
        for a in [
            sq_doorbell(256),
            rq_doorbell(256),
            sq_doorbell(4095),
            rq_doorbell(4095),
            sq_doorbell(3) + 8,
            sq_doorbell(3) + 12,
            cq_doorbell(256),
            cq_doorbell(3) + 4,
            0xF_FFF8, // the last CQN the address space could hold
        ] {
            assert_eq!(tb.write(a, 0x1111), SLVERR, "{a:#x}");
        }
        assert_eq!(tb.read(rq_doorbell(1)), (OKAY, 0));
        assert_eq!(tb.read(sq_doorbell(300)), (SLVERR, 0));
        tb.run_until("drained", |tb| !tb.u.db_valid.val());
        assert_eq!(tb.dbs, want);

        // hold db_ready low: 16 doorbells fit, the 17th waits in the slave with awready/wready low
        tb.sink = Sink::Hold;
        for i in 0..16u32 {
            let v = 0xC000 | i;
            assert_eq!(tb.write(sq_doorbell(i * 7), v), OKAY);
            want.push((SQ, i * 7, v as u16));
        }
        tb.start_write(rq_doorbell(9), 0xFFFF_BEEF, 0xF, Timing { aw: 0, w: 0, b: 0 });
        want.push((RQ, 9, 0xBEEF));
        tb.run(100);
        assert!(tb.wr.as_ref().unwrap().resp.is_none(), "a doorbell into a full FIFO must wait");
        assert!(!tb.u.awready.val() && !tb.u.wready.val() && !tb.u.bvalid.val());
        assert!(tb.u.db_valid.val());
        // reads go on meanwhile
        assert_eq!(tb.read(REG_ID), (OKAY, ID_VALUE));
        assert_eq!(tb.dbs.len(), 9);
        tb.sink = Sink::Random;
        assert_eq!(tb.finish_write(), OKAY);
        // a burst with the sink mostly stalled: nothing lost, nothing reordered
        for _ in 0..120 {
            let (kind, idx) = (tb.rng.gen_range(0..3u64), tb.rng.gen_range(0..256u32));
            let a = [sq_doorbell(idx), rq_doorbell(idx), cq_doorbell(idx)][kind as usize];
            let v: u32 = tb.rng.gen();
            tb.sink = if tb.rng.gen_ratio(1, 3) { Sink::Hold } else { Sink::Random };
            assert_eq!(tb.write(a, v), OKAY);
            want.push((kind, idx, v as u16));
        }
        tb.sink = Sink::Random;
        tb.run_until("drained", |tb| !tb.u.db_valid.val());
        assert_eq!(tb.dbs.len(), want.len());
        assert_eq!(tb.dbs, want);
    }

    #[test]
    fn counter_window_samples_ctr_value_two_cycles_after_ctr_index() {
        let mut tb = Tb::new(Csr::default(), 4);
        assert_eq!(CTR_LATENCY, 2, "the testbench's counter owner has two register stages");
        let mut order: Vec<usize> = (0..COUNTERS).collect();
        for round in 0..3 {
            order.shuffle(&mut tb.rng);
            for &i in &order {
                if round > 0 {
                    tb.counters[i] = tb.rng.gen();
                }
                let t = Timing { aw: 0, w: 0, b: round as u64 };
                assert_eq!(tb.read_t(REG_COUNTERS + 4 * i as u32, t), (OKAY, tb.counters[i]), "counter {i}");
                assert_eq!(tb.u.ctr_index.val().to_u64(), i as u64);
            }
        }
    }
}
