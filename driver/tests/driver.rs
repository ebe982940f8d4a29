//! The driver against a register-level stand-in of the device: the stand-in decodes what reaches the register
//! slave (table commands, doorbells) and reads and writes the rings in host memory as the RTL's WQE Prefetch and
//! CQE Generation do, so these tests pin the driver's side of `docs/host-interface.md`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rnic_driver::driver::{ARP_POLLS, ARP_TRIES};
use rnic_driver::{CsrBus, Driver, DriverError};
use rnic_driver::host::*;
use rnic_driver::verbs::*;
use rnic_driver::memory::HostMemory;

/// What the device saw.
#[derive(Default)]
struct Dev {
    regs: HashMap<u32, u32>,
    cmd_data: [u32; CMD_DATA_WORDS],
    done: u32,
    err: u8,
    mrs: HashMap<u32, MrCmd>,
    qps: HashMap<u32, QpCmd>,
    psns: Vec<(u8, u32, u32)>,
    sqs: HashMap<u32, RingCmd>,
    rqs: HashMap<u32, RingCmd>,
    cqs: HashMap<u32, (RingCmd, u16, u16)>, // ring, producer, consumer (from CQ_DB)
    sq_db: Vec<(u32, u16)>,
    rq_db: Vec<(u32, u16)>,
    caps: u32,
    /// CMD_SET_IPV6's address
    ipv6: u128,
    /// CMD_SET_VLAN's word
    vlan: u32,
    /// ARP: the addresses queried, polls of ARP_MAC_HI in all, the poll after which the
    /// neighbour answers (None: never), and its MAC
    arp_queries: Vec<u32>,
    arp_polls: u32,
    arp_answers_after: Option<u32>,
    arp_mac: [u8; 6],
}

#[derive(Clone)]
struct Bus(Arc<Mutex<Dev>>);

impl CsrBus for Bus {
    fn write32(&mut self, addr: u32, v: u32) -> Result<(), DriverError> {
        let mut d = self.0.lock().unwrap();
        match addr {
            a if (REG_CMD_DATA..REG_CMD_DATA + 4 * CMD_DATA_WORDS as u32).contains(&a) => {
                d.cmd_data[((a - REG_CMD_DATA) / 4) as usize] = v
            }
            REG_CMD => {
                let (op, index, data) = ((v & 0xFF) as u8, v >> 8, d.cmd_data);
                d.err = CMD_ERR_NONE;
                match op {
                    CMD_WRITE_MR => {
                        d.mrs.insert(index, MrCmd::decode(&data));
                    }
                    CMD_INVALIDATE_MR => {
                        d.mrs.remove(&index);
                    }
                    CMD_WRITE_QP => {
                        d.qps.insert(index, QpCmd::decode(&data));
                    }
                    CMD_WRITE_QP_REQ | CMD_WRITE_QP_RESP => d.psns.push((op, index, data[0])),
                    CMD_WRITE_SQ => {
                        d.sqs.insert(index, RingCmd::decode(&data));
                    }
                    CMD_WRITE_RQ => {
                        d.rqs.insert(index, RingCmd::decode(&data));
                    }
                    CMD_WRITE_CQ => {
                        d.cqs.insert(index, (RingCmd::decode(&data), 0, 0));
                    }
                    CMD_SET_IPV6 => d.ipv6 = words_u128(&data[..4]),
                    CMD_SET_VLAN => d.vlan = data[0],
                    _ => d.err = CMD_ERR_BAD_OP,
                }
                d.done += 1;
            }
            a if a >= CQ_DB_BASE => {
                let cqn = (a - CQ_DB_BASE) / CQ_DB_STRIDE;
                d.cqs.get_mut(&cqn).ok_or(DriverError::Bus(format!("CQ_DB of unknown CQ {cqn}")))?.2 = v as u16;
            }
            a if a >= DB_BASE => {
                let (qpn, off) = ((a - DB_BASE) / DB_STRIDE, (a - DB_BASE) % DB_STRIDE);
                match off {
                    DB_SQ => d.sq_db.push((qpn, v as u16)),
                    DB_RQ => d.rq_db.push((qpn, v as u16)),
                    _ => return Err(DriverError::Bus(format!("SLVERR at 0x{a:x}"))),
                }
            }
            REG_ARP_QUERY => {
                d.arp_queries.push(v);
            }
            _ => {
                d.regs.insert(addr, v);
            }
        }
        Ok(())
    }
    fn read32(&mut self, addr: u32) -> Result<u32, DriverError> {
        let mut d = self.0.lock().unwrap();
        let m = d.arp_mac;
        Ok(match addr {
            REG_ARP_MAC_HI => {
                d.arp_polls += 1;
                let valid = d.arp_answers_after.is_some_and(|n| d.arp_polls > n);
                u32::from(u16::from_be_bytes([m[0], m[1]])) | if valid { ARP_VALID } else { 0 }
            }
            REG_ARP_MAC_LO => u32::from_be_bytes([m[2], m[3], m[4], m[5]]),
            REG_ID => ID_VALUE,
            REG_VERSION => VERSION_VALUE,
            REG_CAPS => d.caps,
            REG_SIZES => 8 | 10 << 8 | 8 << 16 | 5 << 24,
            REG_CMD_STATUS => u32::from(d.err) << 8 | d.done << 16,
            a => *d.regs.get(&a).unwrap_or(&0),
        })
    }
}

impl Dev {
    /// CQE Generation's job: write the next CQE of `cqn` with the right phase.
    fn complete(&mut self, mem: &Mutex<HostMemory>, cqn: u32, mut c: Cqe) {
        let (ring, pi, _) = self.cqs.get_mut(&cqn).unwrap();
        let slot = u64::from(*pi) & ((1 << ring.log2_entries) - 1);
        c.phase = (u32::from(*pi) >> ring.log2_entries) & 1 == 0;
        mem.lock().unwrap().write(ring.base + slot * CQE_BYTES as u64, &c.encode()).unwrap();
        *pi = pi.wrapping_add(1);
    }
}

fn setup(caps: u32) -> (Driver<Bus>, Arc<Mutex<Dev>>, Arc<Mutex<HostMemory>>) {
    let dev = Arc::new(Mutex::new(Dev { caps, ..Default::default() }));
    let mem = Arc::new(Mutex::new(HostMemory::new()));
    let drv = Driver::open(Bus(dev.clone()), mem.clone()).unwrap();
    (drv, dev, mem)
}

fn rts(drv: &mut Driver<Bus>, send_wr: u32) -> (u32, Cq, Cq) {
    let pd = drv.alloc_pd();
    let scq = drv.create_cq(16).unwrap();
    let rcq = drv.create_cq(16).unwrap();
    let cap = QpCap { max_send_wr: send_wr, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 256 };
    let qpn = drv
        .create_qp(pd, QpInitAttr { qp_type: QpType::Rc, send_cq: scq, recv_cq: rcq, cap, sq_sig_all: false })
        .unwrap();
    let av = AddressVector {
        dmac: MacAddr([0x52, 0x54, 0, 0, 0, 1]),
        smac: None,
        sip: None,
        dip: "10.0.0.1".parse().unwrap(),
        sport: Some(0xC011),
        traffic_class: 0,
        hop_limit: 64,
    };
    for attr in [
        QpAttr { qp_state: Some(QpState::Init), qp_access_flags: Some(AccessFlags::ALL), ..Default::default() },
        QpAttr {
            qp_state: Some(QpState::Rtr),
            path_mtu: Some(1024),
            dest_qp_num: Some(0x22),
            rq_psn: Some(0x123456),
            max_dest_rd_atomic: Some(16),
            min_rnr_timer: Some(12),
            av: Some(av),
            ..Default::default()
        },
        QpAttr {
            qp_state: Some(QpState::Rts),
            sq_psn: Some(0xABCDEF),
            timeout: Some(14),
            retry_cnt: Some(7),
            rnr_retry: Some(7),
            max_rd_atomic: Some(16),
            ..Default::default()
        },
    ] {
        drv.modify_qp(qpn, &attr).unwrap();
    }
    (qpn, scq, rcq)
}

#[test]
fn open_rejects_a_device_that_is_not_an_rnic() {
    struct Zero;
    impl CsrBus for Zero {
        fn write32(&mut self, _: u32, _: u32) -> Result<(), DriverError> {
            Ok(())
        }
        fn read32(&mut self, _: u32) -> Result<u32, DriverError> {
            Ok(0xFFFF_FFFF)
        }
    }
    let e = Driver::open(Zero, Arc::new(Mutex::new(HostMemory::new()))).err().unwrap();
    assert_eq!(e, DriverError::NotAnRnic(0xFFFF_FFFF));
}

#[test]
fn set_up_reaches_the_tables_as_documented() {
    let (mut drv, dev, mem) = setup(CAP_RC);
    assert_eq!(drv.info.log2_mrs, 10);
    drv.set_address([2, 0, 0, 0, 0, 0x22], 0x0A00_0002).unwrap();
    let buf = mem.lock().unwrap().alloc(8192);
    let pd = drv.alloc_pd();
    let key = drv.reg_mr(pd, buf, 8192, AccessFlags::ALL).unwrap();
    let (qpn, scq, rcq) = rts(&mut drv, 4);
    let d = dev.lock().unwrap();
    assert_eq!(d.regs[&REG_MAC_LO], 0x0000_0022);
    assert_eq!(d.regs[&REG_MAC_HI], 0x0200);
    assert_eq!(d.regs[&REG_IPV4], 0x0A00_0002);
    let m = d.mrs[&(key >> 8)];
    assert_eq!((m.va, m.len, m.dma_base, m.key, m.pd, m.access), (buf, 8192, buf, key, pd.0, 0xF));
    let q = d.qps[&qpn];
    assert_eq!(q.state, QpState::Rts as u8);
    assert_eq!((q.path_mtu, q.dest_qpn, q.access), (3, 0x22, 0xF));
    assert_eq!((q.min_rnr_timer, q.timeout, q.retry_cnt, q.rnr_retry), (12, 14, 7, 7));
    assert_eq!((q.max_rd_atomic, q.max_dest_rd_atomic), (16, 16));
    assert_eq!((q.remote_ip, q.remote_mac, q.sport), (0x0A00_0001, [0x52, 0x54, 0, 0, 0, 1], 0xC011));
    assert_eq!((q.send_cq, q.recv_cq), (scq.0, rcq.0));
    assert!(d.psns.contains(&(CMD_WRITE_QP_RESP, qpn, 0x123456)));
    assert!(d.psns.contains(&(CMD_WRITE_QP_REQ, qpn, 0xABCDEF)));
    assert_eq!(d.sqs[&qpn].cqn, scq.0);
    assert_eq!(d.rqs[&qpn].cqn, rcq.0);
    assert_eq!(d.sqs[&qpn].base % 64, 0);
    // UC is not in this device's CAPS
    drop(d);
    let cap = QpCap { max_send_wr: 1, max_recv_wr: 1, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let e = drv.create_qp(pd, QpInitAttr { qp_type: QpType::Uc, send_cq: scq, recv_cq: rcq, cap, sq_sig_all: false });
    assert_eq!(e.err(), Some(DriverError::Unsupported(CAP_UC)));
    // bad arguments never reach the device
    assert!(drv.reg_mr(pd, 0x1000, 64, AccessFlags::ALL).is_err());
    assert!(drv.reg_mr(pd, buf, 64, AccessFlags::REMOTE_WRITE).is_err());
}

#[test]
fn wqes_land_in_their_slots_and_doorbells_count_slots() {
    let (mut drv, dev, mem) = setup(CAP_RC | CAP_ATOMIC | CAP_MASKED_ATOMIC | CAP_INLINE);
    let (qpn, scq, _) = rts(&mut drv, 4); // 8-slot send ring
    let sq = dev.lock().unwrap().sqs[&qpn];
    assert_eq!(sq.log2_entries, 3);
    let mut w = SendWr::new(7, WrOpcode::RdmaWriteWithImm, vec![Sge { addr: 0x1000, length: 100, lkey: 0x155 }]);
    w.remote_addr = 0x7F00_0000_0040;
    w.rkey = 0x2FA;
    w.imm_data = 0x0102_0304;
    drv.post_send(qpn, &w).unwrap();
    let mut m = SendWr::new(8, WrOpcode::MaskedAtomicFetchAndAdd, vec![Sge { addr: 0x2000, length: 8, lkey: 0x155 }]);
    m.compare_add = 1;
    m.compare_add_mask = 0x8000_0000_8000_0000;
    drv.post_send(qpn, &m).unwrap();
    let mut i = SendWr::new(9, WrOpcode::Send, vec![]);
    i.set_inline((0..100u8).collect());
    drv.post_send(qpn, &i).unwrap();
    let d = dev.lock().unwrap();
    assert_eq!(d.sq_db, vec![(qpn, 1), (qpn, 3), (qpn, 6)], "the doorbell carries the producer index in slots");
    let mem_ = mem.lock().unwrap();
    let slot = |k: u64| -> [u8; 64] { mem_.read(sq.base + 64 * k, 64).unwrap().try_into().unwrap() };
    let w0 = SendWqe::decode(&slot(0));
    assert_eq!((w0.wr_id, w0.opcode, w0.flags), (7, WR_RDMA_WRITE_WITH_IMM, WQE_SIGNALED));
    assert_eq!((w0.local_addr, w0.length, w0.lkey, w0.remote_addr, w0.rkey), (0x1000, 100, 0x155, 0x7F00_0000_0040, 0x2FA));
    assert_eq!(&slot(0)[12..16], &[1, 2, 3, 4], "imm_data in wire order");
    assert_eq!(slot(1)[8], WR_MASK_SLOT, "the mask slot goes first");
    assert_eq!(&slot(1)[16..24], &0x8000_0000_8000_0000u64.to_le_bytes());
    let w1 = SendWqe::decode(&slot(2));
    assert_eq!((w1.opcode, w1.flags & WQE_EXT, w1.compare_add), (WR_MASKED_ATOMIC_FETCH_AND_ADD, WQE_EXT, 1));
    let w3 = SendWqe::decode(&slot(3));
    assert_eq!((w3.flags & WQE_INLINE, w3.length), (WQE_INLINE, 100));
    assert_eq!(&slot(4)[..], &(0..64u8).collect::<Vec<_>>()[..]);
    assert_eq!(&slot(5)[..36], &(64..100u8).collect::<Vec<_>>()[..]);
    assert_eq!(&slot(5)[36..], &[0u8; 28][..]);
    drop(mem_);
    drop(d);
    // 6 of 8 slots used: a 4-slot WQE (130 inline bytes) does not fit
    let mut big = i.clone();
    big.inline_data = vec![0; 130];
    assert_eq!(drv.post_send(qpn, &big).err(), Some(DriverError::Verbs(VerbsError::QueueFull)));
    // completing the first two frees their 3 slots; the 4-slot inline WQE at index 6 would cross the 8-slot
    // read group, so it needs 2 padding slots first: 6 > 5 free
    for wr_id in [7, 8] {
        let c = Cqe { wr_id, qp_num: qpn, status: 0, opcode: WC_RDMA_WRITE, ..Default::default() };
        dev.lock().unwrap().complete(&mem, scq.0, c);
    }
    assert_eq!(drv.poll_cq(scq, 16).unwrap().len(), 2);
    assert_eq!(drv.post_send(qpn, &big).err(), Some(DriverError::Verbs(VerbsError::QueueFull)));
    let c = Cqe { wr_id: 9, qp_num: qpn, status: 0, opcode: WC_SEND, ..Default::default() };
    dev.lock().unwrap().complete(&mem, scq.0, c);
    assert_eq!(drv.poll_cq(scq, 16).unwrap().len(), 1);
    drv.post_send(qpn, &big).unwrap();
    assert_eq!(dev.lock().unwrap().sq_db.last(), Some(&(qpn, 12)), "index 6 + 2 padding + 4 slots");
    let mem_ = mem.lock().unwrap();
    let slot = |k: u64| -> [u8; 64] { mem_.read(sq.base + 64 * k, 64).unwrap().try_into().unwrap() };
    assert_eq!((slot(6)[8], slot(7)[8]), (WR_NOP_SLOT, WR_NOP_SLOT), "padding to the group end");
    let w = SendWqe::decode(&slot(0));
    assert_eq!((w.flags & WQE_INLINE, w.length), (WQE_INLINE, 130), "the ring wrapped: the WQE at index 8");
    drop(mem_);
    // too long for inline, and inline on a READ: refused by the driver
    let mut long = i.clone();
    long.inline_data = vec![0; MAX_INLINE + 1];
    assert!(matches!(drv.post_send(qpn, &long), Err(DriverError::Verbs(VerbsError::InvalidArgument(_)))));
    let mut rd = i.clone();
    rd.opcode = WrOpcode::RdmaRead;
    assert!(matches!(drv.post_send(qpn, &rd), Err(DriverError::Verbs(VerbsError::InvalidArgument(_)))));
}

#[test]
fn poll_cq_follows_the_phase_across_wraps_and_reports_the_consumer_index() {
    let (mut drv, dev, mem) = setup(CAP_RC);
    let (qpn, _, rcq) = rts(&mut drv, 4);
    let ring = dev.lock().unwrap().cqs[&rcq.0].0;
    assert_eq!(ring.log2_entries, 4);
    let mut next = 0u64;
    let mut got = 0u64;
    for round in 0..10u64 {
        // the device writes 1..=16 CQEs, the driver polls them in two calls
        let n = 1 + (round * 7) % 16;
        for _ in 0..n {
            let c = Cqe {
                wr_id: next,
                byte_len: next as u32,
                imm_or_inv: 0xA0B0_C0D0,
                qp_num: qpn,
                src_qp: 0x22,
                status: wc_status_code(WcStatus::Success),
                opcode: WC_RECV_RDMA_WITH_IMM,
                wc_flags: WcFlags::WITH_IMM as u8,
                phase: false,
            };
            dev.lock().unwrap().complete(&mem, rcq.0, c);
            next += 1;
        }
        let mut wcs = drv.poll_cq(rcq, 5).unwrap();
        wcs.extend(drv.poll_cq(rcq, 64).unwrap());
        assert_eq!(wcs.len() as u64, n, "round {round}");
        for wc in wcs {
            assert_eq!(wc.wr_id, got);
            assert_eq!(wc.byte_len, got as u32);
            assert_eq!((wc.opcode, wc.status, wc.imm_data, wc.src_qp), (WcOpcode::RecvRdmaWithImm, WcStatus::Success, 0xA0B0_C0D0, 0x22));
            got += 1;
        }
        assert!(drv.poll_cq(rcq, 4).unwrap().is_empty(), "nothing new until the device writes");
        let d = dev.lock().unwrap();
        assert_eq!(d.cqs[&rcq.0].2, d.cqs[&rcq.0].1, "CQ_DB carries the consumer index");
    }
    assert!(got > 32, "the ring wrapped at least twice");
}

#[test]
fn a_cqe_with_an_unknown_code_is_an_error_not_a_panic() {
    let (mut drv, dev, mem) = setup(CAP_RC);
    let (qpn, scq, _) = rts(&mut drv, 4);
    let c = Cqe { wr_id: 1, qp_num: qpn, status: 200, opcode: 0, ..Default::default() };
    dev.lock().unwrap().complete(&mem, scq.0, c);
    assert_eq!(drv.poll_cq(scq, 1).err(), Some(DriverError::BadCqe { status: 200, opcode: 0 }));
}

#[test]
fn the_driver_refuses_what_the_device_lacks() {
    let (mut drv, dev, _mem) = setup(CAP_RC);
    let (qpn, _, _) = rts(&mut drv, 4);
    let a = SendWr::new(1, WrOpcode::AtomicFetchAndAdd, vec![Sge { addr: 0x1000, length: 8, lkey: 1 }]);
    assert_eq!(drv.post_send(qpn, &a).err(), Some(DriverError::Unsupported(CAP_ATOMIC)));
    let mut i = SendWr::new(2, WrOpcode::Send, vec![]);
    i.set_inline(vec![1, 2, 3]);
    assert_eq!(drv.post_send(qpn, &i).err(), Some(DriverError::Unsupported(CAP_INLINE)));
    assert!(dev.lock().unwrap().sq_db.is_empty(), "nothing reached the device");
}

/// ARP resolution: the answer read from ARP_MAC_LO/HI once bit 31 is set, asked again up to three times, then
/// a clear error; a resolved neighbour comes from the cache without a request.
#[test]
fn resolves_a_neighbour_by_the_arp_registers() {
    let (mut drv, dev, _) = setup(CAP_RC);
    let ip = std::net::Ipv4Addr::new(10, 0, 0, 1);
    {
        let mut d = dev.lock().unwrap();
        d.arp_mac = [0x52, 0x54, 0, 0x12, 0x34, 0x56];
        d.arp_answers_after = Some(ARP_POLLS + 5); // the first request goes unanswered
    }
    let mut pauses = 0;
    let m = drv.resolve(ip, &mut || pauses += 1).unwrap();
    assert_eq!(m, MacAddr([0x52, 0x54, 0, 0x12, 0x34, 0x56]));
    assert_eq!(dev.lock().unwrap().arp_queries, vec![0x0A00_0001, 0x0A00_0001], "asked again after ARP_POLLS polls");
    assert_eq!(pauses, ARP_POLLS + 5);
    // cached: no request on the wire
    assert_eq!(drv.resolve(ip, &mut || ()).unwrap(), m);
    assert_eq!(dev.lock().unwrap().arp_queries.len(), 2);
    // nobody answers: three requests, then the error names the address
    dev.lock().unwrap().arp_answers_after = None;
    let e = drv.resolve(std::net::Ipv4Addr::new(10, 0, 0, 7), &mut || ()).unwrap_err();
    assert_eq!(e, DriverError::Unreachable { ip: std::net::Ipv4Addr::new(10, 0, 0, 7), tries: ARP_TRIES });
    assert!(e.to_string().contains("no ARP answer from 10.0.0.7"), "{e}");
    assert_eq!(dev.lock().unwrap().arp_queries.len(), 2 + ARP_TRIES as usize);
}

/// UD (`CAPS` bit 2): the QP's Q_Key reaches `WRITE_QP` word 11; a UD SEND's WQE carries its address handle
/// (remote QPN and Q_Key, destination MAC, UDP source port, destination GID, traffic class, hop limit) in the
/// bytes a SEND does not use; anything but SEND, or a UD WR without a destination, is refused.
#[test]
fn a_ud_wqe_carries_its_address_handle() {
    let (mut drv, dev, mem) = setup(CAP_UD);
    let pd = drv.alloc_pd();
    let cq = drv.create_cq(16).unwrap();
    let cap = QpCap { max_send_wr: 4, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let qpn = drv.create_qp(pd, QpInitAttr { qp_type: QpType::Ud, send_cq: cq, recv_cq: cq, cap, sq_sig_all: false }).unwrap();
    for attr in [
        QpAttr { qp_state: Some(QpState::Init), qkey: Some(0x1111_1111), ..Default::default() },
        QpAttr { qp_state: Some(QpState::Rtr), ..Default::default() },
        QpAttr { qp_state: Some(QpState::Rts), sq_psn: Some(7), ..Default::default() },
    ] {
        drv.modify_qp(qpn, &attr).unwrap();
    }
    assert_eq!(dev.lock().unwrap().qps[&qpn].qkey, 0x1111_1111);
    let av = AddressVector {
        dmac: MacAddr([0x52, 0x54, 0, 0, 0, 9]),
        smac: None,
        sip: None,
        dip: "10.0.0.9".parse().unwrap(),
        sport: None,
        traffic_class: 3,
        hop_limit: 64,
    };
    let mut w = SendWr::new(5, WrOpcode::SendWithImm, vec![Sge { addr: 0x1000, length: 100, lkey: 0x155 }]);
    w.imm_data = 0xA1B2_C3D4;
    assert!(drv.post_send(qpn, &w).is_err(), "a UD WR needs a destination");
    w.ud = Some(UdDest { av, remote_qpn: 0x11, remote_qkey: 0x1111_1111 });
    drv.post_send(qpn, &w).unwrap();
    let mut r = w.clone();
    r.opcode = WrOpcode::RdmaWrite;
    assert!(drv.post_send(qpn, &r).is_err(), "UD has SEND only");
    let sq = dev.lock().unwrap().sqs[&qpn];
    let b: [u8; 64] = mem.lock().unwrap().read(sq.base, 64).unwrap().try_into().unwrap();
    let s = SendWqe::decode(&b);
    assert_eq!((s.wr_id, s.opcode, s.local_addr, s.length, s.lkey, s.imm_or_inv), (5, WR_SEND_WITH_IMM, 0x1000, 100, 0x155, 0xA1B2_C3D4));
    let ah = UdAh::decode(&b);
    let want = UdAh {
        remote_qpn: 0x11,
        remote_qkey: 0x1111_1111,
        dmac: [0x52, 0x54, 0, 0, 0, 9],
        sport: 0,
        dgid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 0, 0, 9],
        traffic_class: 3,
        hop_limit: 64,
    };
    assert_eq!(ah, want);
    assert_eq!(UdAh::decode(&want.encode_with(&s)), want, "round trip");
    // an IPv6 destination needs our IPv6 address (the RNIC would send from ::); then its GID is the address
    let mut w6 = w.clone();
    w6.ud = Some(UdDest { av: AddressVector { dip: "fd00::9".parse().unwrap(), ..av }, remote_qpn: 0x11, remote_qkey: 1 });
    assert!(drv.post_send(qpn, &w6).is_err(), "IPv6 without an IPv6 address of ours");
    drv.set_ipv6(Some("fd00::11".parse().unwrap())).unwrap();
    assert_eq!(dev.lock().unwrap().ipv6, 0xFD00_0000_0000_0000_0000_0000_0000_0011, "CMD_SET_IPV6 w0-3");
    drv.post_send(qpn, &w6).unwrap();
    let b: [u8; 64] = mem.lock().unwrap().read(sq.base + 64, 64).unwrap().try_into().unwrap();
    assert_eq!(UdAh::decode(&b).dgid, "fd00::9".parse::<std::net::Ipv6Addr>().unwrap().octets());
    assert_eq!(dev.lock().unwrap().sq_db, vec![(qpn, 1), (qpn, 2)], "only the SENDs went to the ring");
    // the port's VLAN: on with the tag's TCI, off; the reserved VIDs refused before any command
    drv.set_vlan(Some(0xA000 | 100)).unwrap();
    assert_eq!(dev.lock().unwrap().vlan, 0x8000_A064, "CMD_SET_VLAN w0: on, PCP 5, VID 100");
    for bad in [0x2000, 0x0FFF] {
        assert!(drv.set_vlan(Some(bad)).is_err(), "VID {:#x}", bad & 0xFFF);
        assert_eq!(dev.lock().unwrap().vlan, 0x8000_A064);
    }
    drv.set_vlan(None).unwrap();
    assert_eq!(dev.lock().unwrap().vlan, 0, "off");
}

/// The CM agent (`rnic_driver::cm`) over the driver itself, no simulator: QP1 is created and brought to RTS
/// (a UD QP whose Q_Key the device takes as the GSI's), its receives posted; a connect resolves the peer by
/// the RNIC's ARP and rings QP1's send doorbell once, for a REQ in host memory that parses as rdma_cm's (the
/// service ID, our QPN and PSN, the rdma_cm header with both addresses).
#[test]
fn the_cm_agent_runs_over_the_driver() {
    use rnic_driver::cm::CmAgent;
    use rnic_driver::mad::{service_id, CmMsg, CmaHdr, Mad, RDMA_PS_TCP};
    let (mut drv, dev, mem) = setup(CAP_RC | CAP_UD);
    drv.set_address([2, 0, 0, 0, 0, 0x22], 0x0A00_0002).unwrap();
    {
        let mut d = dev.lock().unwrap();
        d.arp_answers_after = Some(0);
        d.arp_mac = [0x52, 0x54, 0, 0, 0, 1];
    }
    let ours: std::net::Ipv4Addr = "10.0.0.2".parse().unwrap();
    let peer: std::net::Ipv4Addr = "10.0.0.1".parse().unwrap();
    let mut agent = CmAgent::open(Mutex::new(drv), MacAddr([2, 0, 0, 0, 0, 0x22]), ours).unwrap();
    {
        let d = dev.lock().unwrap();
        assert_eq!(d.qps[&1].state, QpState::Rts as u8);
        assert_eq!(d.rq_db.iter().filter(|(q, _)| *q == 1).last().map(|x| x.1), Some(16), "16 receives posted on QP1");
        assert!(d.sq_db.is_empty());
    }
    let sid = service_id(RDMA_PS_TCP, 7174);
    agent.connect(peer, sid, 0x12, 0x5A_5000, 1024, 0, 0xC012).unwrap();
    let d = dev.lock().unwrap();
    assert_eq!(d.arp_queries, vec![0x0A00_0001]);
    assert_eq!(d.sq_db, vec![(1, 1)], "one WQE on QP1");
    let m = mem.lock().unwrap();
    let reqs: Vec<_> = m
        .regions()
        .iter()
        .flat_map(|(base, b)| (0..b.len().saturating_sub(255)).step_by(512).map(move |o| (base + o as u64, &b[o..o + 256])))
        .filter_map(|(_, b)| match Mad::parse(b).ok()?.cm? {
            CmMsg::Req(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(reqs.len(), 1, "one REQ in host memory");
    let r = &reqs[0];
    assert_eq!((r.service_id, r.local_qpn, r.starting_psn), (sid, 0x12, 0x5A_5000));
    assert_eq!(CmaHdr::parse(&r.private_data).unwrap().v4_addrs(), Some((ours, peer)));
}
