//! The AXI4 master adapter: the core's in-order DMA ports (`docs/host-interface.md`, "DMA ports") as AXI4
//! read and write bursts for the PCIe DMA IP's slave bridge (QDMA `s_axib_*`: 512-bit, INCR bursts, at most
//! 32 reads and 32 writes outstanding). One AXI ID on each channel, so responses come back in order.
//!
//! * [`AxiReadMaster`]: a read request (`addr`, `len` up to 4,096 bytes) becomes one INCR burst of the 64-byte
//!   beats that cover it, or two when it crosses a 4 KiB page (an AXI burst never does). The beats come back
//!   as the core's response, its last beat marked. At most 32 bursts outstanding.
//! * [`AxiWriteMaster`]: the core's write beats (each with its own address) are joined into INCR bursts of
//!   consecutive beats, closed at the command's `last`, at a page end, at 16 beats, or where the next beat does
//!   not follow on. One beat is held until the next arrives to know whether it ends its burst. A burst's W
//!   beats may reach the bridge before its AW (AXI4 allows it); at most 16 beats of an open burst are queued
//!   ahead of its AW, less than the write data FIFO holds, so a bridge that waits for AW cannot deadlock it. At
//!   most 32 bursts wait for their write response; `outstanding` and `idle` show them (ordering to the host
//!   rests on one AXI ID and PCIe's posted-write order: a CQE written after its payload lands after it, with
//!   no write-response fence; why, and what the card must confirm: `docs/board-u250.md`, clocks and resets).
//!
//! Both run in the core clock; the channels cross to the PCIe clock through [`super::cdc::AsyncFifo`]s in
//! [`super::DmaAxiCdc`]. Address arithmetic is split over register stages (a 64-bit add would cost more than
//! the 6 LUT levels the core's clock allows).

use rtl::common::consts::k;
use rtl::common::fifo::Fifo;
use super::cdc::AsyncFifo;
use rust_hdl::prelude::*;

/// Most bursts of each kind outstanding at the bridge (PG302, AXI Bridge Slave: 32 reads, 32 writes).
pub const MAX_OUTSTANDING: u64 = 32;
/// Longest write burst, in beats.
pub const MAX_WRITE_BURST: u64 = 16;

#[derive(Copy, Clone, Debug, PartialEq, LogicState)]
enum RdState {
    Idle,
    Lo,
    Split,
    Ar1,
    Ar2,
}

/// Read requests to AXI4 read bursts, and the bursts' data back as the core's in-order response.
#[derive(LogicBlock)]
pub struct AxiReadMaster {
    pub clock: Signal<In, Clock>,
    pub rd_req_valid: Signal<In, Bit>,
    pub rd_req_ready: Signal<Out, Bit>,
    pub rd_req_addr: Signal<In, Bits<64>>,
    pub rd_req_len: Signal<In, Bits<13>>,
    pub rd_req_tag: Signal<In, Bits<8>>,
    pub rd_resp_valid: Signal<Out, Bit>,
    pub rd_resp_ready: Signal<In, Bit>,
    pub rd_resp_data: Signal<Out, Bits<512>>,
    pub rd_resp_tag: Signal<Out, Bits<8>>,
    pub rd_resp_last: Signal<Out, Bit>,
    /// AR: a burst of `ar_len + 1` 64-byte beats from `ar_addr` (64-byte aligned).
    pub ar_valid: Signal<Out, Bit>,
    pub ar_ready: Signal<In, Bit>,
    pub ar_addr: Signal<Out, Bits<64>>,
    pub ar_len: Signal<Out, Bits<8>>,
    pub r_valid: Signal<In, Bit>,
    pub r_ready: Signal<Out, Bit>,
    pub r_data: Signal<In, Bits<512>>,
    pub r_last: Signal<In, Bit>,
    pub r_resp: Signal<In, Bits<2>>,
    /// Bursts issued and not yet wholly answered; beats answered with an error response (their data is passed on
    /// as it came: the host interface has no error path, the count is for `rnic board stats`).
    pub outstanding: Signal<Out, Bits<6>>,
    pub errors: Signal<Out, Bits<16>>,
    state: DFF<RdState>,
    addr: DFF<Bits<64>>,
    len: DFF<Bits<13>>,
    tag: DFF<Bits<8>>,
    /// the request's last byte, as an offset from its page (bit 12: in the next page)
    lo_end: DFF<Bits<13>>,
    crosses: DFF<Bit>,
    len1: DFF<Bits<8>>,
    len2: DFF<Bits<8>>,
    /// the next page's number (addr[63:12] + 1) in two halves, the low half's carry between them
    pg_lo: DFF<Bits<26>>,
    pg_carry: DFF<Bit>,
    pg_hi: DFF<Bits<26>>,
    outst: DFF<Bits<6>>,
    errs: DFF<Bits<16>>,
    /// per burst in flight: the request's tag (7:0) and whether its last beat ends the request (8)
    info: Fifo<Bits<9>, 5, 6>,
    l_ar: Signal<Local, Bit>,
    /// an R beat handed to the core this cycle, and the last of its burst
    l_rbeat: Signal<Local, Bit>,
    l_rlast: Signal<Local, Bit>,
    l_room: Signal<Local, Bit>,
    l_sum: Signal<Local, Bits<13>>,
    l_len1: Signal<Local, Bits<6>>,
    l_ends1: Signal<Local, Bit>,
    k_one13: Constant<Bits<13>>,
    k_ones26: Constant<Bits<26>>,
    k_max: Constant<Bits<6>>,
    k_63: Constant<Bits<6>>,
    k_align: Constant<Bits<64>>,
    k_ends: Constant<Bits<9>>,
    k_one6: Constant<Bits<6>>,
    k_one16: Constant<Bits<16>>,
    k_one26: Constant<Bits<26>>,
    k_zero13: Constant<Bits<13>>,
    k_zero2: Constant<Bits<2>>,
}

impl Default for AxiReadMaster {
    fn default() -> Self {
        Self {
            clock: Default::default(),
            rd_req_valid: Default::default(),
            rd_req_ready: Default::default(),
            rd_req_addr: Default::default(),
            rd_req_len: Default::default(),
            rd_req_tag: Default::default(),
            rd_resp_valid: Default::default(),
            rd_resp_ready: Default::default(),
            rd_resp_data: Default::default(),
            rd_resp_tag: Default::default(),
            rd_resp_last: Default::default(),
            ar_valid: Default::default(),
            ar_ready: Default::default(),
            ar_addr: Default::default(),
            ar_len: Default::default(),
            r_valid: Default::default(),
            r_ready: Default::default(),
            r_data: Default::default(),
            r_last: Default::default(),
            r_resp: Default::default(),
            outstanding: Default::default(),
            errors: Default::default(),
            state: Default::default(),
            addr: Default::default(),
            len: Default::default(),
            tag: Default::default(),
            lo_end: Default::default(),
            crosses: Default::default(),
            len1: Default::default(),
            len2: Default::default(),
            pg_lo: Default::default(),
            pg_carry: Default::default(),
            pg_hi: Default::default(),
            outst: Default::default(),
            errs: Default::default(),
            info: Default::default(),
            l_ar: Default::default(),
            l_rbeat: Default::default(),
            l_rlast: Default::default(),
            l_room: Default::default(),
            l_sum: Default::default(),
            l_len1: Default::default(),
            l_ends1: Default::default(),
            k_one13: k(1),
            k_ones26: k((1 << 26) - 1),
            k_max: k(MAX_OUTSTANDING),
            k_63: k(63),
            k_align: k(!63u64),
            k_ends: k(0x100),
            k_one6: k(1),
            k_one16: k(1),
            k_one26: k(1),
            k_zero13: k(0),
            k_zero2: k(0),
        }
    }
}

impl Logic for AxiReadMaster {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, state, addr, len, tag, lo_end, crosses, len1, len2, pg_lo, pg_carry, pg_hi, outst, errs);
        clock!(self, clock, info);
        self.rd_req_ready.next = self.state.q.val() == RdState::Idle;
        self.l_room.next = (self.outst.q.val() != self.k_max.val()) & !self.info.full.val();
        self.ar_valid.next = false;
        self.ar_addr.next = self.addr.q.val() & self.k_align.val();
        self.ar_len.next = self.len1.q.val();
        self.info.din.next = bit_cast::<9, 8>(self.tag.q.val());
        self.info.push.next = false;
        self.l_ar.next = false;
        // the first burst's beats - 1: to the page's end if the request crosses it, else to its last beat
        if self.lo_end.q.val().get_bit(12) {
            self.l_len1.next = self.k_63.val() - self.addr.q.val().get_bits::<6>(6);
        } else {
            self.l_len1.next = self.lo_end.q.val().get_bits::<6>(6) - self.addr.q.val().get_bits::<6>(6);
        }
        self.l_ends1.next = !self.crosses.q.val();
        self.l_sum.next = bit_cast::<13, 12>(self.addr.q.val().get_bits::<12>(0)) + self.len.q.val() - self.k_one13.val();
        match self.state.q.val() {
            RdState::Idle => {
                if self.rd_req_valid.val() {
                    self.addr.d.next = self.rd_req_addr.val();
                    self.len.d.next = self.rd_req_len.val();
                    // a zero-length read reads the one beat its address is in
                    if self.rd_req_len.val() == self.k_zero13.val() {
                        self.len.d.next = self.k_one13.val();
                    }
                    self.tag.d.next = self.rd_req_tag.val();
                    self.state.d.next = RdState::Lo;
                }
            }
            RdState::Lo => {
                self.lo_end.d.next = self.l_sum.val();
                self.pg_lo.d.next = self.addr.q.val().get_bits::<26>(12) + self.k_one26.val();
                self.pg_carry.d.next = self.addr.q.val().get_bits::<26>(12) == self.k_ones26.val();
                self.state.d.next = RdState::Split;
            }
            RdState::Split => {
                self.crosses.d.next = self.lo_end.q.val().get_bit(12);
                self.len2.d.next = bit_cast::<8, 6>(self.lo_end.q.val().get_bits::<6>(6));
                self.len1.d.next = bit_cast::<8, 6>(self.l_len1.val());
                self.pg_hi.d.next = self.addr.q.val().get_bits::<26>(38) + bit_cast::<26, 1>(self.pg_carry.q.val().into());
                self.state.d.next = RdState::Ar1;
            }
            RdState::Ar1 => {
                self.ar_valid.next = self.l_room.val();
                self.info.push.next = self.l_room.val() & self.ar_ready.val();
                self.info.din.next = bit_cast::<9, 8>(self.tag.q.val()) | (bit_cast::<9, 1>(self.l_ends1.val().into()) << 8);
                if self.l_room.val() & self.ar_ready.val() {
                    self.l_ar.next = true;
                    if self.crosses.q.val() {
                        self.state.d.next = RdState::Ar2;
                    } else {
                        self.state.d.next = RdState::Idle;
                    }
                }
            }
            RdState::Ar2 => {
                self.ar_valid.next = self.l_room.val();
                self.ar_addr.next = (bit_cast::<64, 26>(self.pg_hi.q.val()) << 38) | (bit_cast::<64, 26>(self.pg_lo.q.val()) << 12);
                self.ar_len.next = self.len2.q.val();
                self.info.push.next = self.l_room.val() & self.ar_ready.val();
                self.info.din.next = bit_cast::<9, 8>(self.tag.q.val()) | self.k_ends.val();
                if self.l_room.val() & self.ar_ready.val() {
                    self.l_ar.next = true;
                    self.state.d.next = RdState::Idle;
                }
            }
            _ => {
                self.state.d.next = RdState::Idle;
            }
        }
        // responses: each beat with its burst's tag; a burst's last beat ends the request unless it was the
        // first half of a split one
        self.rd_resp_valid.next = self.r_valid.val() & !self.info.empty.val();
        self.r_ready.next = self.rd_resp_ready.val() & !self.info.empty.val();
        self.rd_resp_data.next = self.r_data.val();
        self.rd_resp_tag.next = self.info.dout.val().get_bits::<8>(0);
        self.rd_resp_last.next = self.r_last.val() & self.info.dout.val().get_bit(8);
        self.l_rbeat.next = self.r_valid.val() & self.rd_resp_ready.val() & !self.info.empty.val();
        self.l_rlast.next = self.l_rbeat.val() & self.r_last.val();
        self.info.pop.next = self.l_rlast.val();
        if self.l_ar.val() & !self.l_rlast.val() {
            self.outst.d.next = self.outst.q.val() + self.k_one6.val();
        } else if !self.l_ar.val() & self.l_rlast.val() {
            self.outst.d.next = self.outst.q.val() - self.k_one6.val();
        }
        if self.l_rbeat.val() & (self.r_resp.val() != self.k_zero2.val()) {
            self.errs.d.next = self.errs.q.val() + self.k_one16.val();
        }
        self.outstanding.next = self.outst.q.val();
        self.errors.next = self.errs.q.val();
    }
}

/// The core's write beats to AXI4 write bursts (AW, W) and their responses (B).
#[derive(LogicBlock)]
pub struct AxiWriteMaster {
    pub clock: Signal<In, Clock>,
    pub wr_valid: Signal<In, Bit>,
    pub wr_ready: Signal<Out, Bit>,
    pub wr_addr: Signal<In, Bits<64>>,
    pub wr_data: Signal<In, Bits<512>>,
    pub wr_strb: Signal<In, Bits<64>>,
    pub wr_last: Signal<In, Bit>,
    pub aw_valid: Signal<Out, Bit>,
    pub aw_ready: Signal<In, Bit>,
    pub aw_addr: Signal<Out, Bits<64>>,
    pub aw_len: Signal<Out, Bits<8>>,
    pub w_valid: Signal<Out, Bit>,
    pub w_ready: Signal<In, Bit>,
    pub w_data: Signal<Out, Bits<512>>,
    pub w_strb: Signal<Out, Bits<64>>,
    pub w_last: Signal<Out, Bit>,
    pub b_valid: Signal<In, Bit>,
    pub b_ready: Signal<Out, Bit>,
    pub b_resp: Signal<In, Bits<2>>,
    /// Bursts waiting for their write response; responses with an error; nothing held or outstanding.
    pub outstanding: Signal<Out, Bits<6>>,
    pub errors: Signal<Out, Bits<16>>,
    pub idle: Signal<Out, Bit>,
    /// the held beat: valid, 64-byte address (addr[63:6]), data, strobes, the command's last, and the next
    /// beat's index in the page (a page's last beat has index 0 next: the next beat, in another page, does not
    /// follow on, so a burst never crosses a page)
    h_v: DFF<Bit>,
    h_addr: DFF<Bits<58>>,
    h_data: DFF<Bits<512>>,
    h_strb: DFF<Bits<64>>,
    h_last: DFF<Bit>,
    h_inc: DFF<Bits<6>>,
    /// beats of the open burst before the held one, and the open burst's first address
    cnt: DFF<Bits<4>>,
    first: DFF<Bits<58>>,
    outst: DFF<Bits<6>>,
    errs: DFF<Bits<16>>,
    l_can: Signal<Local, Bit>,
    l_emit: Signal<Local, Bit>,
    l_take: Signal<Local, Bit>,
    l_follows: Signal<Local, Bit>,
    l_close: Signal<Local, Bit>,
    l_aw: Signal<Local, Bit>,
    k_max: Constant<Bits<6>>,
    k_burst: Constant<Bits<4>>,
    k_zero4: Constant<Bits<4>>,
    k_one4: Constant<Bits<4>>,
    k_one6: Constant<Bits<6>>,
    k_one16: Constant<Bits<16>>,
    k_zero2: Constant<Bits<2>>,
    k_zero6: Constant<Bits<6>>,
}

impl Default for AxiWriteMaster {
    fn default() -> Self {
        Self {
            clock: Default::default(),
            wr_valid: Default::default(),
            wr_ready: Default::default(),
            wr_addr: Default::default(),
            wr_data: Default::default(),
            wr_strb: Default::default(),
            wr_last: Default::default(),
            aw_valid: Default::default(),
            aw_ready: Default::default(),
            aw_addr: Default::default(),
            aw_len: Default::default(),
            w_valid: Default::default(),
            w_ready: Default::default(),
            w_data: Default::default(),
            w_strb: Default::default(),
            w_last: Default::default(),
            b_valid: Default::default(),
            b_ready: Default::default(),
            b_resp: Default::default(),
            outstanding: Default::default(),
            errors: Default::default(),
            idle: Default::default(),
            h_v: Default::default(),
            h_addr: Default::default(),
            h_data: Default::default(),
            h_strb: Default::default(),
            h_last: Default::default(),
            h_inc: Default::default(),
            cnt: Default::default(),
            first: Default::default(),
            outst: Default::default(),
            errs: Default::default(),
            l_can: Default::default(),
            l_emit: Default::default(),
            l_take: Default::default(),
            l_follows: Default::default(),
            l_close: Default::default(),
            l_aw: Default::default(),
            k_max: k(MAX_OUTSTANDING),
            k_burst: k(MAX_WRITE_BURST - 1),
            k_zero4: k(0),
            k_one4: k(1),
            k_one6: k(1),
            k_one16: k(1),
            k_zero2: k(0),
            k_zero6: k(0),
        }
    }
}

impl Logic for AxiWriteMaster {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, h_v, h_addr, h_data, h_strb, h_last, h_inc, cnt, first, outst, errs);
        // the held beat goes out (W, and AW when it closes its burst) when the next beat comes or it is a
        // command's last; both FIFOs must have room, and a burst slot at the bridge
        self.l_can.next = self.w_ready.val() & self.aw_ready.val() & (self.outst.q.val() != self.k_max.val());
        self.wr_ready.next = !self.h_v.q.val() | self.l_can.val();
        self.l_take.next = self.wr_valid.val() & (!self.h_v.q.val() | self.l_can.val());
        self.l_emit.next = self.h_v.q.val() & self.l_can.val() & (self.h_last.q.val() | self.wr_valid.val());
        self.l_follows.next = (self.wr_addr.val().get_bits::<6>(6) == self.h_inc.q.val())
            & (self.wr_addr.val().get_bits::<52>(12) == self.h_addr.q.val().get_bits::<52>(6));
        self.l_close.next = self.h_last.q.val()
            | (self.cnt.q.val() == self.k_burst.val())
            | !self.l_follows.val();
        self.l_aw.next = self.l_emit.val() & self.l_close.val();
        self.w_valid.next = self.l_emit.val();
        self.w_data.next = self.h_data.q.val();
        self.w_strb.next = self.h_strb.q.val();
        self.w_last.next = self.l_close.val();
        self.aw_valid.next = self.l_aw.val();
        self.aw_len.next = bit_cast::<8, 4>(self.cnt.q.val());
        if self.cnt.q.val() == self.k_zero4.val() {
            self.aw_addr.next = bit_cast::<64, 58>(self.h_addr.q.val()) << 6;
        } else {
            self.aw_addr.next = bit_cast::<64, 58>(self.first.q.val()) << 6;
        }
        if self.l_emit.val() {
            if self.l_close.val() {
                self.cnt.d.next = self.k_zero4.val();
            } else {
                self.cnt.d.next = self.cnt.q.val() + self.k_one4.val();
                if self.cnt.q.val() == self.k_zero4.val() {
                    self.first.d.next = self.h_addr.q.val();
                }
            }
        }
        if self.l_take.val() {
            self.h_v.d.next = true;
            self.h_addr.d.next = self.wr_addr.val().get_bits::<58>(6);
            self.h_data.d.next = self.wr_data.val();
            self.h_strb.d.next = self.wr_strb.val();
            self.h_last.d.next = self.wr_last.val();
            self.h_inc.d.next = self.wr_addr.val().get_bits::<6>(6) + self.k_one6.val();
        } else if self.l_emit.val() {
            self.h_v.d.next = false;
        }
        self.b_ready.next = true;
        if self.l_aw.val() & !self.b_valid.val() {
            self.outst.d.next = self.outst.q.val() + self.k_one6.val();
        } else if !self.l_aw.val() & self.b_valid.val() {
            self.outst.d.next = self.outst.q.val() - self.k_one6.val();
        }
        if self.b_valid.val() & (self.b_resp.val() != self.k_zero2.val()) {
            self.errs.d.next = self.errs.q.val() + self.k_one16.val();
        }
        self.outstanding.next = self.outst.q.val();
        self.errors.next = self.errs.q.val();
        self.idle.next = !self.h_v.q.val() & (self.outst.q.val() == self.k_zero6.val());
    }
}

/// Odd parity of each byte of a 512-bit word (bit i for byte i: the byte and its bit hold an odd number of
/// ones), as the QDMA slave bridge takes it on `s_axib_wuser`.
#[derive(LogicBlock, Default)]
pub struct OddParity512 {
    pub data: Signal<In, Bits<512>>,
    pub parity: Signal<Out, Bits<64>>,
}

impl Logic for OddParity512 {
    fn update(&mut self) {
        let d = self.data.val();
        let mut p = 0u64;
        for i in 0..64 {
            if d.get_bits::<8>(8 * i).to_u64().count_ones() % 2 == 0 {
                p |= 1 << i;
            }
        }
        self.parity.next = bits(p);
    }

    fn connect(&mut self) {
        self.parity.connect();
    }

    fn hdl(&self) -> Verilog {
        Verilog::Custom(
            "integer i;\n\
             always @(*) begin\n   for (i = 0; i < 64; i = i + 1) parity[i] = ~^data[8*i +: 8];\nend\n"
                .into(),
        )
    }
}

/// The DMA ports as an AXI4 master in the PCIe clock: [`AxiReadMaster`] and [`AxiWriteMaster`] in the core
/// clock (`cclk`), each AXI channel through an [`AsyncFifo`] to the PCIe clock (`pclk`), write parity added
/// there. Port names follow the QDMA slave bridge's (`s_axib_*` on the IP, `m_axi_*` here); the fixed
/// fields (ID 0, size 64 bytes, INCR) are tied off in the board top.
#[derive(LogicBlock, Default)]
pub struct DmaAxi {
    pub cclk: Signal<In, Clock>,
    pub pclk: Signal<In, Clock>,
    pub rd_req_valid: Signal<In, Bit>,
    pub rd_req_ready: Signal<Out, Bit>,
    pub rd_req_addr: Signal<In, Bits<64>>,
    pub rd_req_len: Signal<In, Bits<13>>,
    pub rd_req_tag: Signal<In, Bits<8>>,
    pub rd_resp_valid: Signal<Out, Bit>,
    pub rd_resp_ready: Signal<In, Bit>,
    pub rd_resp_data: Signal<Out, Bits<512>>,
    pub rd_resp_tag: Signal<Out, Bits<8>>,
    pub rd_resp_last: Signal<Out, Bit>,
    pub wr_valid: Signal<In, Bit>,
    pub wr_ready: Signal<Out, Bit>,
    pub wr_addr: Signal<In, Bits<64>>,
    pub wr_data: Signal<In, Bits<512>>,
    pub wr_strb: Signal<In, Bits<64>>,
    pub wr_last: Signal<In, Bit>,
    pub m_axi_arvalid: Signal<Out, Bit>,
    pub m_axi_arready: Signal<In, Bit>,
    pub m_axi_araddr: Signal<Out, Bits<64>>,
    pub m_axi_arlen: Signal<Out, Bits<8>>,
    pub m_axi_rvalid: Signal<In, Bit>,
    pub m_axi_rready: Signal<Out, Bit>,
    pub m_axi_rdata: Signal<In, Bits<512>>,
    pub m_axi_rlast: Signal<In, Bit>,
    pub m_axi_rresp: Signal<In, Bits<2>>,
    pub m_axi_awvalid: Signal<Out, Bit>,
    pub m_axi_awready: Signal<In, Bit>,
    pub m_axi_awaddr: Signal<Out, Bits<64>>,
    pub m_axi_awlen: Signal<Out, Bits<8>>,
    pub m_axi_wvalid: Signal<Out, Bit>,
    pub m_axi_wready: Signal<In, Bit>,
    pub m_axi_wdata: Signal<Out, Bits<512>>,
    pub m_axi_wstrb: Signal<Out, Bits<64>>,
    pub m_axi_wlast: Signal<Out, Bit>,
    pub m_axi_wuser: Signal<Out, Bits<64>>,
    pub m_axi_bvalid: Signal<In, Bit>,
    pub m_axi_bready: Signal<Out, Bit>,
    pub m_axi_bresp: Signal<In, Bits<2>>,
    /// the adapter's state, in the core clock (board registers)
    pub rd_outstanding: Signal<Out, Bits<6>>,
    pub rd_errors: Signal<Out, Bits<16>>,
    pub wr_outstanding: Signal<Out, Bits<6>>,
    pub wr_errors: Signal<Out, Bits<16>>,
    pub wr_idle: Signal<Out, Bit>,
    rdm: AxiReadMaster,
    wrm: AxiWriteMaster,
    ar: AsyncFifo<Bits<72>, 4, 5>,
    r: AsyncFifo<Bits<515>, 5, 6>,
    aw: AsyncFifo<Bits<72>, 4, 5>,
    w: AsyncFifo<Bits<577>, 5, 6>,
    b: AsyncFifo<Bits<2>, 4, 5>,
    par: OddParity512,
}

impl Logic for DmaAxi {
    #[hdl_gen]
    fn update(&mut self) {
        self.rdm.clock.next = self.cclk.val();
        self.wrm.clock.next = self.cclk.val();
        // requests and write data: core clock to PCIe clock; responses back
        self.ar.wclk.next = self.cclk.val();
        self.aw.wclk.next = self.cclk.val();
        self.w.wclk.next = self.cclk.val();
        self.r.rclk.next = self.cclk.val();
        self.b.rclk.next = self.cclk.val();
        self.ar.rclk.next = self.pclk.val();
        self.aw.rclk.next = self.pclk.val();
        self.w.rclk.next = self.pclk.val();
        self.r.wclk.next = self.pclk.val();
        self.b.wclk.next = self.pclk.val();
        // the core's ports
        self.rdm.rd_req_valid.next = self.rd_req_valid.val();
        self.rd_req_ready.next = self.rdm.rd_req_ready.val();
        self.rdm.rd_req_addr.next = self.rd_req_addr.val();
        self.rdm.rd_req_len.next = self.rd_req_len.val();
        self.rdm.rd_req_tag.next = self.rd_req_tag.val();
        self.rd_resp_valid.next = self.rdm.rd_resp_valid.val();
        self.rdm.rd_resp_ready.next = self.rd_resp_ready.val();
        self.rd_resp_data.next = self.rdm.rd_resp_data.val();
        self.rd_resp_tag.next = self.rdm.rd_resp_tag.val();
        self.rd_resp_last.next = self.rdm.rd_resp_last.val();
        self.wrm.wr_valid.next = self.wr_valid.val();
        self.wr_ready.next = self.wrm.wr_ready.val();
        self.wrm.wr_addr.next = self.wr_addr.val();
        self.wrm.wr_data.next = self.wr_data.val();
        self.wrm.wr_strb.next = self.wr_strb.val();
        self.wrm.wr_last.next = self.wr_last.val();
        // AR
        self.ar.push.next = self.rdm.ar_valid.val();
        self.rdm.ar_ready.next = !self.ar.full.val();
        self.ar.din.next = bit_cast::<72, 64>(self.rdm.ar_addr.val()) | (bit_cast::<72, 8>(self.rdm.ar_len.val()) << 64);
        self.m_axi_arvalid.next = !self.ar.empty.val();
        self.m_axi_araddr.next = self.ar.dout.val().get_bits::<64>(0);
        self.m_axi_arlen.next = self.ar.dout.val().get_bits::<8>(64);
        self.ar.pop.next = self.m_axi_arready.val();
        // R
        self.m_axi_rready.next = !self.r.full.val();
        self.r.push.next = self.m_axi_rvalid.val();
        self.r.din.next = bit_cast::<515, 512>(self.m_axi_rdata.val())
            | (bit_cast::<515, 1>(self.m_axi_rlast.val().into()) << 512)
            | (bit_cast::<515, 2>(self.m_axi_rresp.val()) << 513);
        self.rdm.r_valid.next = !self.r.empty.val();
        self.rdm.r_data.next = self.r.dout.val().get_bits::<512>(0);
        self.rdm.r_last.next = self.r.dout.val().get_bit(512);
        self.rdm.r_resp.next = self.r.dout.val().get_bits::<2>(513);
        self.r.pop.next = self.rdm.r_ready.val();
        // AW
        self.aw.push.next = self.wrm.aw_valid.val();
        self.wrm.aw_ready.next = !self.aw.full.val();
        self.aw.din.next = bit_cast::<72, 64>(self.wrm.aw_addr.val()) | (bit_cast::<72, 8>(self.wrm.aw_len.val()) << 64);
        self.m_axi_awvalid.next = !self.aw.empty.val();
        self.m_axi_awaddr.next = self.aw.dout.val().get_bits::<64>(0);
        self.m_axi_awlen.next = self.aw.dout.val().get_bits::<8>(64);
        self.aw.pop.next = self.m_axi_awready.val();
        // W, parity on the PCIe side
        self.w.push.next = self.wrm.w_valid.val();
        self.wrm.w_ready.next = !self.w.full.val();
        self.w.din.next = bit_cast::<577, 512>(self.wrm.w_data.val())
            | (bit_cast::<577, 64>(self.wrm.w_strb.val()) << 512)
            | (bit_cast::<577, 1>(self.wrm.w_last.val().into()) << 576);
        self.m_axi_wvalid.next = !self.w.empty.val();
        self.m_axi_wdata.next = self.w.dout.val().get_bits::<512>(0);
        self.m_axi_wstrb.next = self.w.dout.val().get_bits::<64>(512);
        self.m_axi_wlast.next = self.w.dout.val().get_bit(576);
        self.par.data.next = self.w.dout.val().get_bits::<512>(0);
        self.m_axi_wuser.next = self.par.parity.val();
        self.w.pop.next = self.m_axi_wready.val();
        // B
        self.m_axi_bready.next = !self.b.full.val();
        self.b.push.next = self.m_axi_bvalid.val();
        self.b.din.next = self.m_axi_bresp.val();
        self.wrm.b_valid.next = !self.b.empty.val();
        self.wrm.b_resp.next = self.b.dout.val();
        self.b.pop.next = self.wrm.b_ready.val();
        self.rd_outstanding.next = self.rdm.outstanding.val();
        self.rd_errors.next = self.rdm.errors.val();
        self.wr_outstanding.next = self.wrm.outstanding.val();
        self.wr_errors.next = self.wrm.errors.val();
        self.wr_idle.next = self.wrm.idle.val();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use std::collections::VecDeque;

    fn tick<B: Block>(b: &mut B, clock: impl Fn(&mut B, bool)) {
        clock(b, true);
        assert!(simulate(b, 50));
        clock(b, false);
        assert!(simulate(b, 50));
    }

    /// A beat's data in the test's host memory: its 64-byte address repeated.
    fn beat_data(addr: u64) -> Bits<512> {
        let mut v = Bits::<512>::default();
        for i in 0..8 {
            v = v | (bit_cast::<512, 64>(bits::<64>(addr ^ (i as u64 * 0x0101_0101))) << (64 * i));
        }
        v
    }

    /// Random reads (lengths 0 to 4,096, addresses anywhere in 64 bits, often near a page end) against a
    /// bridge model that takes AR and gives R beats after random delays: every burst stays inside a 4 KiB page
    /// and covers only beats of its request, at most 32 bursts are outstanding, and the core gets exactly the
    /// beats covering each request, in order, with its tag, the last one marked.
    #[test]
    fn reads_become_page_bounded_bursts_and_come_back_in_order() {
        let mut rng = SmallRng::seed_from_u64(11);
        let mut m = AxiReadMaster::default();
        m.connect_all();
        let mut reqs: VecDeque<(u64, u64, u64)> = VecDeque::new();
        let mut want: VecDeque<(u64, u64, bool)> = VecDeque::new(); // beat address, tag, last
        let mut bursts: VecDeque<(u64, u64, u64)> = VecDeque::new(); // due cycle, address, beats
        let mut r_beat: Option<(u64, u64)> = None; // address, beats left
        let (mut got, mut split, mut max_out) = (0u64, 0u64, 0u64);
        let mut pending: Option<(u64, u64, u64)> = None;
        for cycle in 0..60_000u64 {
            if pending.is_none() && reqs.len() < 40 && rng.gen_bool(0.3) {
                let page = rng.gen::<u64>() >> 12;
                let off = if rng.gen_bool(0.5) { 4096 - rng.gen_range(1..200) } else { rng.gen_range(0..4096) };
                let len = if rng.gen_bool(0.1) { 0 } else { rng.gen_range(1..=4096) };
                let p = (page << 12 | off, len, rng.gen_range(0..256));
                pending = Some(p);
            }
            m.rd_req_valid.next = pending.is_some();
            if let Some((a, l, t)) = pending {
                m.rd_req_addr.next = bits(a);
                m.rd_req_len.next = bits(l);
                m.rd_req_tag.next = bits(t);
            }
            m.ar_ready.next = rng.gen_bool(0.7);
            m.rd_resp_ready.next = rng.gen_bool(0.8);
            // the bridge: R beats of the oldest burst once it is due
            if r_beat.is_none() {
                if let Some(&(due, a, n)) = bursts.front() {
                    if due <= cycle {
                        bursts.pop_front();
                        r_beat = Some((a, n));
                    }
                }
            }
            m.r_valid.next = r_beat.is_some();
            if let Some((a, n)) = r_beat {
                m.r_data.next = beat_data(a);
                m.r_last.next = n == 1;
                m.r_resp.next = bits(0);
            }
            assert!(simulate(&mut m, 50));
            // handshakes as the edge sees them
            if m.rd_req_valid.val() && m.rd_req_ready.val() {
                let (a, l, t) = pending.take().unwrap();
                let first = a & !63;
                let last = (a + l.max(1) - 1) & !63;
                let mut b = first;
                while b <= last {
                    want.push_back((b, t, b == last));
                    b += 64;
                }
                reqs.push_back((a, l, t));
            }
            if m.ar_valid.val() && m.ar_ready.val() {
                let a = m.ar_addr.val().to_u64();
                let n = m.ar_len.val().to_u64() + 1;
                assert_eq!(a % 64, 0);
                assert!(a >> 12 == (a + 64 * n - 1) >> 12, "burst {a:#x} x{n} crosses a 4 KiB page");
                bursts.push_back((cycle + rng.gen_range(5..60), a, n));
            }
            max_out = max_out.max(m.outstanding.val().to_u64());
            assert!(m.outstanding.val().to_u64() <= MAX_OUTSTANDING);
            if m.r_valid.val() && m.r_ready.val() {
                let (a, n) = r_beat.unwrap();
                let (wa, wt, wl) = want.pop_front().expect("a beat nobody asked for");
                assert_eq!(a, wa, "cycle {cycle}: beat address");
                assert!(m.rd_resp_valid.val());
                assert_eq!(m.rd_resp_data.val(), beat_data(wa));
                assert_eq!(m.rd_resp_tag.val().to_u64(), wt);
                assert_eq!(m.rd_resp_last.val(), wl, "cycle {cycle}: last of {wa:#x}");
                if n == 1 && !wl {
                    split += 1;
                }
                if wl {
                    got += 1;
                    reqs.pop_front();
                }
                r_beat = if n == 1 { None } else { Some((a + 64, n - 1)) };
            }
            tick(&mut m, |m, c| m.clock.next = c.into());
        }
        assert!(got > 1500 && split > 300 && max_out >= 8, "{got} requests answered, {split} split, {max_out} most outstanding");
        yosys_validate("axi_read_master", &generate_verilog(&m)).unwrap();
    }

    /// Commands of 1 to 70 consecutive beats from random addresses (crossing pages), with gaps, against a bridge
    /// model whose AW and W FIFOs fill at random and whose B responses come late: every burst stays in its
    /// page, has at most 16 beats and `w_last` on its last, the beats the bridge writes are the core's beats at
    /// their addresses in order, at most 32 bursts wait for B, and at the end everything is answered (`idle`).
    #[test]
    fn write_beats_become_bursts_that_keep_every_beat_in_place() {
        let mut rng = SmallRng::seed_from_u64(12);
        let mut m = AxiWriteMaster::default();
        m.connect_all();
        let mut beats: VecDeque<(u64, u64, bool)> = VecDeque::new(); // address, strobe, last
        let mut sent: VecDeque<(u64, u64)> = VecDeque::new();
        let mut aws: VecDeque<(u64, u64)> = VecDeque::new();
        let mut ws: VecDeque<(Bits<512>, u64, bool)> = VecDeque::new();
        let mut bq: VecDeque<u64> = VecDeque::new();
        let (mut written, mut bursts, mut lens) = (0u64, 0u64, [0u64; 17]);
        for cycle in 0..80_000u64 {
            if beats.is_empty() && cycle < 70_000 && rng.gen_bool(0.05) {
                let a = (rng.gen::<u64>() >> 6 << 6) | if rng.gen_bool(0.5) { 0xFC0 } else { 0 };
                let n = rng.gen_range(1..=70u64);
                for i in 0..n {
                    beats.push_back((a.wrapping_add(64 * i), rng.gen(), i == n - 1));
                }
            }
            let gap = rng.gen_bool(0.2);
            m.wr_valid.next = !beats.is_empty() && !gap;
            if let Some(&(a, s, l)) = beats.front() {
                m.wr_addr.next = bits(a);
                m.wr_data.next = beat_data(a);
                m.wr_strb.next = bits(s);
                m.wr_last.next = l;
            }
            m.aw_ready.next = rng.gen_bool(0.8);
            m.w_ready.next = rng.gen_bool(0.8);
            m.b_valid.next = bq.front().is_some_and(|&due| due <= cycle);
            m.b_resp.next = bits(0);
            assert!(simulate(&mut m, 50));
            if m.wr_valid.val() && m.wr_ready.val() {
                let (a, s, _) = beats.pop_front().unwrap();
                sent.push_back((a, s));
            }
            if m.b_valid.val() {
                bq.pop_front();
            }
            if m.aw_valid.val() {
                assert!(m.aw_ready.val() && m.w_valid.val(), "AW only with its burst's last W");
                let a = m.aw_addr.val().to_u64();
                let n = m.aw_len.val().to_u64() + 1;
                assert!(n <= MAX_WRITE_BURST);
                assert!(a >> 12 == (a + 64 * n - 1) >> 12, "burst {a:#x} x{n} crosses a 4 KiB page");
                aws.push_back((a, n));
                bq.push_back(cycle + rng.gen_range(20..400));
                bursts += 1;
                lens[n as usize] += 1;
            }
            if m.w_valid.val() {
                assert!(m.w_ready.val());
                ws.push_back((m.w_data.val(), m.w_strb.val().to_u64(), m.w_last.val()));
            }
            assert!(m.outstanding.val().to_u64() <= MAX_OUTSTANDING);
            // the bridge writes a burst once its AW and all its W beats are in
            while let Some(&(a, n)) = aws.front() {
                if (ws.len() as u64) < n {
                    break;
                }
                aws.pop_front();
                for i in 0..n {
                    let (d, s, l) = ws.pop_front().unwrap();
                    assert_eq!(l, i == n - 1, "w_last on the burst's last beat only");
                    let (ea, es) = sent.pop_front().expect("a beat the core never sent");
                    assert_eq!((a + 64 * i, s), (ea, es), "cycle {cycle}: beat {i} of burst {a:#x}");
                    assert_eq!(d, beat_data(ea));
                    written += 1;
                }
            }
            tick(&mut m, |m, c| m.clock.next = c.into());
        }
        assert!(sent.is_empty() && ws.is_empty() && aws.is_empty(), "every beat written");
        assert!(m.idle.val(), "idle at the end");
        assert!(written > 20_000 && lens[16] > 100 && lens[1] > 100, "{written} beats in {bursts} bursts, lengths {lens:?}");
        yosys_validate("axi_write_master", &generate_verilog(&m)).unwrap();
    }
}
