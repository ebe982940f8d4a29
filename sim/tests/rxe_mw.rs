//! Memory windows against rxe, RTL as our endpoint, driven by the verbs agent in the VM
//! (`sim::rxe::verbs_agent`): rxe allocates, binds and invalidates windows on its buffer; the RTL WRITEs and
//! READs through them.

use testbench::model::{WcFlags, WcOpcode, WcStatus};

fn pat(seed: u8) -> String {
    (0..64u8).map(|i| format!("{:02x}", i.wrapping_mul(7).wrapping_add(seed))).collect()
}

/// rxe registers an 8 KiB buffer and binds windows on it; the RTL is the requester:
/// * a type 1 window (`ibv_bind_mw`) and a type 2 window (`IBV_WR_BIND_MW`): our WRITE through each lands in
///   rxe's buffer, our READ through each brings rxe's bytes back;
/// * rxe invalidates the type 2 window (`IBV_WR_LOCAL_INV`): our next WRITE through it completes with a remote
///   access error, and rxe's bytes there are unchanged;
/// * a READ through a window bound for remote write only: remote access error;
/// * a type 2 window bound on one QP, our WRITE through it from another QP pair: remote access error, nothing
///   written; from the pair whose QP bound it: written;
/// * a WRITE through the type 1 window that runs 32 bytes past its end (inside the MR): rxe 6.1 takes it (it
///   checks the range against the window's MR, not the window: `docs/rxe-rules.md`).
/// * our SEND_WITH_INV naming a type 2 window rxe bound: rxe's receive completes with that rkey (flagged with
///   the kernel's bit for it, not libibverbs': `docs/rxe-rules.md` 5b), and our next WRITE through the window
///   completes with a remote access error.
/// * rxe's SEND_WITH_INV naming a fast-registration MR of ours: our receive completes with IBV_WC_WITH_INV and
///   that rkey, and rxe's WRITE through the key then completes with a remote access error (our NAK 0x62),
///   our bytes under it unchanged;
/// * our SEND_WITH_INV naming rxe's type 1 window, or its ibv_reg_mr MR (keys rxe may not invalidate): rxe
///   ACKs it and completes its receive with a remote invalid request error (class J as rxe 6.1 does it).
/// * our LOCAL_INV of a fast-registration MR of ours between two WRITEs rxe makes through it: the first lands,
///   the LOCAL_INV completes with success and WC opcode LOCAL_INV, the second completes with a remote access
///   error (our NAK 0x62) and leaves our bytes as the first left them.
/// * a type 1 window of ours (2 KiB of an MR): rxe's WRITE through it lands, rxe's READ through it brings our
///   bytes, and rxe's WRITE that runs 32 bytes past the window's end (inside the MR) completes with a remote
///   access error (our NAK 0x62), our bytes unchanged: the window's range is checked, not the MR's.
/// * a type 2 window of ours bound by a BIND_MW WQE (its completion: BIND_MW): rxe's WRITE through it lands;
///   rxe's SEND_WITH_INV naming it invalidates it (our receive: WITH_INV and the key), and rxe's next WRITE
///   completes with a remote access error (our NAK 0x62), our bytes unchanged.
/// rxe's four NAKs on the link are remote access errors (syndrome 0x62), and so are our four.
#[test]
fn rxe_windows_bound_used_and_invalidated() {
    let img = match sim::rxe::vm_available() {
        Ok(Some(i)) => i,
        Ok(None) => {
            eprintln!("SKIP: qemu-system-x86_64 is not available (set RNIC_REQUIRE_VM=1 to fail instead)");
            return;
        }
        Err(e) => panic!("the VM cannot be built: {e:#}"),
    };
    let p = sim::rxe::verbs_agent::probe_windows(&img, "mw_rxe_windows").unwrap();
    for c in &p.calls {
        eprintln!("agent: {c}");
    }
    assert_eq!(p.error, None, "{p:?}");
    assert_eq!(p.vm_rc, Some(0));
    let ours: Vec<(&str, WcStatus)> = p.ours.iter().map(|(w, s)| (w.as_str(), *s)).collect();
    assert_eq!(
        ours,
        [
            ("type 1 window WRITE", WcStatus::Success),
            ("type 1 window READ", WcStatus::Success),
            ("type 2 window WRITE", WcStatus::Success),
            ("type 2 window READ", WcStatus::Success),
            ("invalidated type 2 window WRITE", WcStatus::RemAccessErr),
            ("type 1 window, 32 bytes past its end WRITE", WcStatus::Success),
            ("write-only type 1 window READ", WcStatus::RemAccessErr),
            ("type 2 window bound on another QP WRITE", WcStatus::RemAccessErr),
            ("type 2 window bound on this QP WRITE", WcStatus::Success),
            ("SEND_WITH_INV", WcStatus::Success),
            ("type 2 window invalidated by our SEND_WITH_INV WRITE", WcStatus::RemAccessErr),
        ]
    );
    // rxe's receive: success, the rkey we named, 64 bytes; its flags are GRH and bit 2, the kernel's
    // IB_WC_WITH_INVALIDATE, which libibverbs reads as IBV_WC_IP_CSUM_OK: rxe 6.1 never sets IBV_WC_WITH_INV (8)
    let (status, flags, inv, len, named) = p.send_inv.unwrap();
    assert_eq!((status, flags, inv, len), (0, 1 | 4, named, 64), "{:?}", p.send_inv);
    let bytes: Vec<(&str, String)> = p.rxe_bytes.iter().map(|(w, h)| (w.as_str(), h.clone())).collect();
    assert_eq!(
        bytes,
        [
            ("type 1 window WRITE", pat(0x10)),
            ("type 2 window WRITE", pat(0x20)),
            // unchanged: still the type 2 window's WRITE
            ("invalidated type 2 window WRITE", pat(0x20)),
            ("type 1 window, 32 bytes past its end WRITE", pat(0x40)),
            // never written
            ("type 2 window bound on another QP WRITE", "00".repeat(64)),
            ("type 2 window bound on this QP WRITE", pat(0x70)),
            ("SEND_WITH_INV", pat(0x80)),
            ("type 2 window invalidated by our SEND_WITH_INV WRITE", "00".repeat(64)),
        ]
    );
    assert_eq!(p.read_back, [("type 1 window".to_string(), true), ("type 2 window".to_string(), true), ("write-only type 1 window".to_string(), false)]);
    assert_eq!(p.naks, [0x62, 0x62, 0x62, 0x62], "rxe's NAKs: remote access error each");
    // rxe invalidates our key: our receive says so (libibverbs' flag, and the key), rxe's next WRITE fails
    let (st, wc, named) = p.rxe_send_inv.clone().unwrap();
    assert_eq!(st, 0, "rxe's SEND_WITH_INV completed");
    assert_eq!((wc.wr_id, wc.status, wc.opcode, wc.byte_len, wc.invalidated_rkey), (88, WcStatus::Success, WcOpcode::Recv, 64, named), "{wc:?}");
    assert!(wc.wc_flags.has(WcFlags::WITH_INV) && wc.wc_flags.has(WcFlags::GRH), "{wc:?}");
    // IBV_WC_REM_ACCESS_ERR is 10 in libibverbs' enum ibv_wc_status
    assert_eq!(p.rxe_write_after_inv, Some((10, true)), "rxe's WRITE through our invalidated key: remote access error, our bytes unchanged");
    assert_eq!(p.our_naks, [0x62, 0x62, 0x62, 0x62], "our NAKs: remote access error each");
    let (bound, w_st, landed, inv_st, recv, after, kept, wkey) = p.our_window2.clone().unwrap();
    assert_eq!((bound.status, bound.opcode), (WcStatus::Success, WcOpcode::BindMw), "our BIND_MW: {bound:?}");
    assert_eq!((w_st, landed, inv_st), (0, true, 0), "rxe's WRITE through our type 2 window, its SEND_WITH_INV");
    assert_eq!((recv.wr_id, recv.status, recv.byte_len), (99, WcStatus::Success, 64), "{recv:?}");
    assert!(recv.wc_flags.has(WcFlags::WITH_INV) && recv.invalidated_rkey == wkey, "{recv:?}");
    assert_eq!((after, kept), (10, true), "rxe's WRITE through our invalidated type 2 window");
    assert_eq!(p.our_window, Some((0, true, 0, true, 10, true)), "rxe through our type 1 window: WRITE, READ, WRITE past its end");
    let (before, wc, after, kept) = p.local_inv.clone().unwrap();
    assert_eq!((wc.status, wc.opcode, wc.byte_len), (WcStatus::Success, WcOpcode::LocalInv, 0), "our LOCAL_INV: {wc:?}");
    assert_eq!((before, after, kept), (0, 10, true), "rxe's WRITE through our key lands before our LOCAL_INV, is refused after it");
    // our SEND_WITH_INV naming a key rxe may not invalidate (its type 1 window, its ibv_reg_mr MR): class J as
    // rxe 6.1 does it: the SEND is ACKed (ours completes with success), rxe's receive completes
    // IBV_WC_REM_INV_REQ_ERR (9) with no flags and no key
    let bad: Vec<(&str, WcStatus, Option<(u32, u32, u32)>)> = p.bad_inv.iter().map(|(w, s, t)| (w.as_str(), *s, *t)).collect();
    assert_eq!(bad, [("type 1 window", WcStatus::Success, Some((9, 0, 0))), ("ibv_reg_mr MR", WcStatus::Success, Some((9, 0, 0)))]);
}
