//! The fault campaigns of `sim::campaign` in CI: the RTL as responder (golden requester), as
//! requester (golden responder) and against itself, each on a link with seeded drops, duplicates, reorders
//! and bit flips both ways; every message must succeed, every byte land, every receive completion come once
//! and in order, nothing hang (`sim::campaign` has the checks). `rnic campaign` runs the same with any seed
//! and size. The UC campaign (`uc_responder`): the golden model sends on UC QPs over a faulty link, the RTL
//! receives; every receive completion must hold a whole message.

use sim::campaign::{pair, requester, responder};
use testbench::mac::MacFaults;

fn dir(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("rnic-faults-{name}-{}", std::process::id()))
}

/// 1 % drop, 0.5 % duplicate, 0.5 % reorder, 0.1 % corrupt each way (the rates), MTU 1024.
#[test]
fn golden_requester_and_rtl_responder_on_a_lossy_link_mtu_1024() {
    eprint!("{}", responder(0xFA17, 1024, 24, MacFaults::campaign(), &dir("golden_requester_and_rtl_responder_on_a_lossy_link_mtu_1024"), None, &mut |_| {}));
}

/// Five times the rates, MTU 4096 (long messages are one to four packets: most losses hit a message's only
/// or last packet, or an ACK).
#[test]
fn golden_requester_and_rtl_responder_on_a_hostile_link_mtu_4096() {
    let f = MacFaults { drop: 0.05, duplicate: 0.025, reorder: 0.025, corrupt: 0.005, fcs: 0.0, reorder_cycles: 2_000 };
    eprint!("{}", responder(0xBAD5EED, 4096, 4, f, &dir("golden_requester_and_rtl_responder_on_a_hostile_link_mtu_4096"), None, &mut |_| {}));
}

/// MTU 256: every 16 KiB message is 64 packets, so go-back-N restarts mid-message (MIDDLE/LAST without a
/// RETH for a WRITE; a READ retried for its rest) all the time.
#[test]
fn golden_requester_and_rtl_responder_on_a_lossy_link_mtu_256() {
    let f = MacFaults { drop: 0.02, duplicate: 0.01, reorder: 0.01, corrupt: 0.002, fcs: 0.0, reorder_cycles: 2_000 };
    eprint!("{}", responder(0x256, 256, 4, f, &dir("golden_requester_and_rtl_responder_on_a_lossy_link_mtu_256"), None, &mut |_| {}));
}

/// The RTL's go-back-N at the rates, MTU 1024.
#[test]
fn rtl_requester_and_golden_responder_on_a_lossy_link_mtu_1024() {
    eprint!("{}", requester(0x5EED1, 1024, 24, MacFaults::campaign(), &dir("rtl_requester_and_golden_responder_on_a_lossy_link_mtu_1024"), None, &mut |_| {}));
}

/// MTU 256, twice the rates: long messages are resumed mid-message (MIDDLE/LAST, READs for the rest).
#[test]
fn rtl_requester_and_golden_responder_on_a_lossy_link_mtu_256() {
    let f = MacFaults { drop: 0.02, duplicate: 0.01, reorder: 0.01, corrupt: 0.002, fcs: 0.0, reorder_cycles: 2_000 };
    eprint!("{}", requester(0x5EED2, 256, 4, f, &dir("rtl_requester_and_golden_responder_on_a_lossy_link_mtu_256"), None, &mut |_| {}));
}

/// MTU 4096, five times the rates.
#[test]
fn rtl_requester_and_golden_responder_on_a_hostile_link_mtu_4096() {
    let f = MacFaults { drop: 0.05, duplicate: 0.025, reorder: 0.025, corrupt: 0.005, fcs: 0.0, reorder_cycles: 2_000 };
    eprint!("{}", requester(0x5EED3, 4096, 4, f, &dir("rtl_requester_and_golden_responder_on_a_hostile_link_mtu_4096"), None, &mut |_| {}));
}

/// RTL against RTL at 100 Gb/s with the fault rates, MTU 1024.
#[test]
fn rtl_pair_on_a_lossy_link_mtu_1024() {
    eprint!("{}", pair(0xBA1B, 1024, 8, MacFaults::campaign(), &dir("rtl_pair_on_a_lossy_link_mtu_1024"), None, &mut |_| {}));
}

/// RTL against RTL, MTU 4096, five times the rates.
#[test]
fn rtl_pair_on_a_hostile_link_mtu_4096() {
    let f = MacFaults { drop: 0.05, duplicate: 0.025, reorder: 0.025, corrupt: 0.005, fcs: 0.0, reorder_cycles: 2_000 };
    eprint!("{}", pair(0xBA1C, 4096, 4, f, &dir("rtl_pair_on_a_hostile_link_mtu_4096"), None, &mut |_| {}));
}

/// Atomics under contention on a link dropping 1 % each way: 16 QPs x 64 FETCH_ADD(1) on one counter
/// (ends at 1,024, the returned values a permutation of 0..1,023) and 16 x 4 increments under a COMPARE_SWAP
/// spin lock; between the FETCH_ADDs 16 x 21 masked FETCH_ADDs with random masks, each QP on a word of its own
/// (every word and returned value as the golden fold: a retransmission must carry its own masks).
/// `rnic campaign --role atomics` runs the 16 x 10,000.
#[test]
fn atomics_under_contention_on_a_lossy_link() {
    let s = sim::campaign::atomics(0xA7, 64, 21, 4, 4, 500.0, MacFaults::drop(0.01), &dir("atomics_under_contention_on_a_lossy_link"), &mut |_| {});
    eprintln!("{s}");
    assert!(s.contains("counter = 1024") && s.contains("336 masked FETCH_ADDs") && s.contains("counter = 64"), "{s}");
}

/// 128 READs posted at once on each of 16 QPs (ib_read_bw's depth against rxe) under the campaign's faults
/// at 100 Gb/s, MTU 1024: the RTL requester keeps at most max_rd_atomic (16) of a QP's READs outstanding,
/// re-requests a partly answered READ from its first missing PSN and does not go back twice before progress;
/// every READ completes and lands (`sim::campaign::reads` checks), and the RTL needs at most 1.5 times the
/// golden requester's resent READ requests and responder frames on the same faults. `rnic campaign --role
/// reads --seed 296 --mtu 1024` runs the same.
#[test]
fn reads_128_deep_on_a_lossy_link_mtu_1024() {
    let r = sim::campaign::reads(296, 1024, 1, MacFaults::campaign(), &dir("reads_128_deep_on_a_lossy_link_mtu_1024"), None, &mut |_| {});
    eprint!("{}", r.summary);
    assert_eq!((r.rtl.reads, r.model.reads), (2048, 2048));
    assert!(r.rtl.resent() > 0 && r.model.resent() > 0, "the faults must cost both requesters READs");
    let (a, b) = r.ratios();
    assert!(a <= 1.5 && b <= 1.5, "RTL / golden: resent {a:.2}x, responder frames {b:.2}x (at most 1.5x each)");
}

/// UC: the golden sender on a link with three times the campaign's rates, the RTL receiving: every receive
/// completion a whole message, nothing written outside the messages, the drops counted.
#[test]
fn golden_uc_sender_and_rtl_responder_on_a_lossy_link_mtu_1024() {
    let c = MacFaults::campaign();
    let f = MacFaults { drop: 3.0 * c.drop, duplicate: 3.0 * c.duplicate, reorder: 3.0 * c.reorder, corrupt: 3.0 * c.corrupt, ..c };
    eprint!("{}", sim::campaign::uc_responder(0x0C0F, 1024, 24, f, &dir("golden_uc_sender_and_rtl_responder_on_a_lossy_link_mtu_1024"), None, &mut |_| {}));
}

/// UD: the golden sender on a link with three times the campaign's rates, the RTL receiving: every receive
/// completion a whole datagram behind its GRH area (byte_len + 40, the sender's QPN), nothing written outside
/// the receive buffers, nothing answered.
#[test]
fn golden_ud_sender_and_rtl_responder_on_a_lossy_link_mtu_1024() {
    let c = MacFaults::campaign();
    let f = MacFaults { drop: 3.0 * c.drop, duplicate: 3.0 * c.duplicate, reorder: 3.0 * c.reorder, corrupt: 3.0 * c.corrupt, ..c };
    eprint!("{}", sim::campaign::ud_responder(0x0D0F, 1024, 24, f, &dir("golden_ud_sender_and_rtl_responder_on_a_lossy_link_mtu_1024"), None, &mut |_| {}));
}
