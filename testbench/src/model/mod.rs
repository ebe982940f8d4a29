//! Golden transaction-level RoCEv2 transport model (no clock cycles) that behaves on the wire as Linux
//! soft-RoCE (rxe) does, following `docs/rxe-rules.md`.
//!
//! * [`verbs`]: the ibverbs-style API types (work requests, work completions, QP attributes, errors).
//! * [`memory`]: the byte-addressable host-memory model.
//! * [`mr`]: protection domains, memory regions and their keys (`index << 8 | tag`, as rxe `rxe_mr_init`).
//! * [`qp`]: QP context (static attributes, requester, completer and responder state), PSN arithmetic.
//! * [`device`]: [`Device`], the RNIC that owns host memory, MRs, CQs and QPs; the receive path with its named
//!   drop reasons (rxe `rxe_recv.c`); frame emission.
//! * [`requester`]: segmentation and go-back-N (rxe `rxe_req.c`).
//! * [`completer`]: ACK/NAK/response processing (rxe `rxe_comp.c`).
//! * [`responder`]: the request state machine (rxe `rxe_resp.c`).
//! * [`timers`]: retransmit and RNR timer values.
//! * [`link`]: a seeded lossy link with pcap output and a driver loop for two devices.
//!
//! Time is explicit: every entry point takes `now_ns`; there are no threads and no sleeps.

pub mod completer;
pub mod device;
pub mod harness;
pub mod link;
pub mod memory;
pub mod mr;
pub mod qp;
pub mod requester;
pub mod responder;
pub mod timers;
pub mod verbs;

pub use device::{Counters, Device, DeviceConfig, DropReason, RxOutcome};
pub use link::{run_pair, Dir, Link, LinkConfig, LinkStats, RunResult};
pub use memory::HostMemory;
pub use mr::{AccessFlags, Mr, Pd};
pub use qp::{psn_add, psn_compare, QpState, QpType};
pub use verbs::*;
