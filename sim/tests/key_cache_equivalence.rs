//! The RTL Key Cache in rust-hdl's simulator and as the Verilator model of its emitted Verilog, run in lockstep
//! on one random stimulus (every output compared on every cycle), and every lookup result compared with a
//! reference check written from Linux rxe (drivers/infiniband/sw/rxe):
//! - `rxe_mr.c lookup_mr`: MR at `key >> 8` exists, key equal (tag), PD equal, `(access & mr->access) ==
//!   access`, state VALID; the error order is the golden model's (`testbench::model::mr::MrTable::check`,
//!   which cannot be used directly: its entries can only be created through the verbs model, with
//!   sequential indexes and generated tags);
//! - `rxe_mr.c mr_check_range`: `iova >= mr.iova && iova + length <= mr.iova + mr.length`, exact arithmetic
//!   (an overflowing `va + len` fails, like the golden model's `checked_add`);
//! - zero length: no check at all (`rxe_resp.c check_rkey`, C9-88; `rxe_mr.c copy_data`).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rtl::transport::key_cache::{KcErr, KeyCache, LATENCY};
use rust_hdl::prelude::*;
use sim::vmodels::key_cache::KeyCache as VKeyCache;
use std::collections::VecDeque;

const N: usize = 1024;
const AW: usize = 10;

#[derive(Clone, Copy, Debug, Default)]
struct Inputs {
    wr_en: bool,
    inv_en: bool,
    wr_index: u64,
    wr_valid: bool,
    wr_tag: u8,
    wr_pd: u32,
    wr_access: u8,
    wr_va: u64,
    wr_len: u64,
    wr_base: u64,
    lk_valid: bool,
    lk_key: u32,
    lk_pd: u32,
    lk_va: u64,
    lk_len: u32,
    lk_access: u8,
    lk_remote: bool,
}

/// (res_valid, res_ok, res_err, res_dma)
type Outputs = (bool, bool, u64, u64);

trait KcDut {
    fn drive(&mut self, i: &Inputs) -> Outputs;
    fn tick(&mut self);
}

struct RustHdlKc(Box<KeyCache<N, AW>>);

impl KcDut for RustHdlKc {
    fn drive(&mut self, i: &Inputs) -> Outputs {
        let u = &mut self.0;
        u.wr_en.next = i.wr_en;
        u.inv_en.next = i.inv_en;
        u.wr_index.next = bits::<AW>(i.wr_index);
        u.wr_valid.next = i.wr_valid;
        u.wr_tag.next = bits::<8>(i.wr_tag as u64);
        u.wr_pd.next = bits::<24>(i.wr_pd as u64);
        u.wr_access.next = bits::<4>(i.wr_access as u64);
        u.wr_va.next = bits::<64>(i.wr_va);
        u.wr_len.next = bits::<64>(i.wr_len);
        u.wr_base.next = bits::<64>(i.wr_base);
        u.lk_valid.next = i.lk_valid;
        u.lk_key.next = bits::<32>(i.lk_key as u64);
        u.lk_pd.next = bits::<24>(i.lk_pd as u64);
        u.lk_va.next = bits::<64>(i.lk_va);
        u.lk_len.next = bits::<32>(i.lk_len as u64);
        u.lk_access.next = bits::<4>(i.lk_access as u64);
        u.lk_remote.next = i.lk_remote;
        u.clock.next = false.into();
        assert!(simulate(&mut **u, 50), "rust-hdl simulation did not settle");
        (u.res_valid.val(), u.res_ok.val(), u.res_err.val().to_u64(), u.res_dma.val().to_u64())
    }
    fn tick(&mut self) {
        self.0.clock.next = true.into();
        assert!(simulate(&mut *self.0, 50), "rust-hdl simulation did not settle");
    }
}

struct VerilatorKc(VKeyCache);

impl KcDut for VerilatorKc {
    fn drive(&mut self, i: &Inputs) -> Outputs {
        let m = &mut self.0;
        m.set_wr_en(i.wr_en as u64);
        m.set_inv_en(i.inv_en as u64);
        m.set_wr_index(i.wr_index);
        m.set_wr_valid(i.wr_valid as u64);
        m.set_wr_tag(i.wr_tag as u64);
        m.set_wr_pd(i.wr_pd as u64);
        m.set_wr_access(i.wr_access as u64);
        m.set_wr_va(i.wr_va);
        m.set_wr_len(i.wr_len);
        m.set_wr_base(i.wr_base);
        m.set_lk_valid(i.lk_valid as u64);
        m.set_lk_key(i.lk_key as u64);
        m.set_lk_pd(i.lk_pd as u64);
        m.set_lk_va(i.lk_va);
        m.set_lk_len(i.lk_len as u64);
        m.set_lk_access(i.lk_access as u64);
        m.set_lk_remote(i.lk_remote as u64);
        m.set_clock(0);
        m.eval();
        (m.res_valid() != 0, m.res_ok() != 0, m.res_err(), m.res_dma())
    }
    fn tick(&mut self) {
        self.0.set_clock(1);
        self.0.eval();
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Entry {
    valid: bool,
    tag: u8,
    pd: u32,
    access: u8,
    va: u64,
    len: u64,
    base: u64,
}

/// The reference check (see the file documentation). Returns the error and, when Ok, the DMA address.
fn reference(t: &[Entry], key: u32, pd: u32, va: u64, len: u32, need: u8) -> (KcErr, u64) {
    if len == 0 {
        return (KcErr::Ok, 0); // check_rkey / copy_data: no lookup for a zero-length access
    }
    let idx = (key >> 8) as usize;
    // lookup_mr: rxe_pool_get_index, then mr->lkey/rkey == key (lkey = rkey, rxe_mr_init)
    if idx >= t.len() || t[idx].tag != (key & 0xFF) as u8 {
        return (KcErr::Key, 0);
    }
    let e = t[idx];
    if !e.valid {
        return (KcErr::Invalid, 0); // mr->state != RXE_MR_STATE_VALID
    }
    if e.pd != pd {
        return (KcErr::Pd, 0); // mr_pd(mr) != pd
    }
    if need & e.access != need {
        return (KcErr::Access, 0); // (access & mr->access) != access
    }
    // mr_check_range, in exact arithmetic; golden: addr.checked_add(len) fails on overflow
    let end = va as u128 + len as u128;
    if va < e.va || end > u64::MAX as u128 || end > e.va as u128 + e.len as u128 {
        return (KcErr::Bounds, 0);
    }
    (KcErr::Ok, e.base.wrapping_add(va - e.va))
}

fn random_entry(rng: &mut SmallRng) -> Entry {
    let len: u64 = match rng.gen_range(0..10) {
        0 => 0,
        1 => rng.gen_range(1..64),
        2 => rng.gen::<u64>() >> rng.gen_range(0..40),
        _ => rng.gen_range(1..1 << 22),
    };
    let va: u64 = match rng.gen_range(0..10) {
        0 => 0u64.wrapping_sub(len), // the region ends at 2^64
        1 => 0,
        2 => u64::MAX - len.min(u64::MAX) / 2 - rng.gen_range(0..1 << 20),
        _ => rng.gen::<u64>() >> rng.gen_range(0..20),
    };
    // a region never runs past 2^64
    let len = if va as u128 + len as u128 > 1u128 << 64 { ((1u128 << 64) - va as u128) as u64 } else { len };
    Entry {
        valid: rng.gen_ratio(9, 10),
        tag: rng.gen(),
        pd: if rng.gen_ratio(3, 4) { rng.gen_range(0..4) } else { rng.gen::<u32>() & 0xFF_FFFF },
        access: rng.gen_range(0..16),
        va,
        len,
        base: rng.gen(),
    }
}

/// One lookup aimed at `t`: mostly at a written entry with the right key and PD, with the edge cases of the
/// brief: region start and end, one byte past either end, length 0, va + len overflowing 64 bits, wrong tag,
/// invalid entries, index >= N, wrong PD, missing access flags.
fn random_lookup(rng: &mut SmallRng, t: &[Entry], hot: &[usize]) -> (u32, u32, u64, u32, u8) {
    let idx = match rng.gen_range(0..20) {
        0 => rng.gen_range(N as u32..1 << 24),
        1 => rng.gen_range(0..N as u32),
        _ => hot[rng.gen_range(0..hot.len())] as u32,
    };
    let e = t.get(idx as usize).copied().unwrap_or_else(|| random_entry(rng));
    let tag = if rng.gen_ratio(15, 16) { e.tag } else { rng.gen() };
    let pd = if rng.gen_ratio(15, 16) { e.pd } else { rng.gen_range(0..4) };
    let need = if rng.gen_ratio(7, 8) { e.access & rng.gen::<u8>() & 0xF } else { rng.gen_range(0..16) };
    let len: u32 = match rng.gen_range(0..12) {
        0 => 0,
        1 => u32::MAX,
        2 => 1,
        3 => e.len.min(u32::MAX as u64) as u32,
        _ => rng.gen_range(1..=e.len.clamp(1, u32::MAX as u64) as u32),
    };
    let va = match rng.gen_range(0..10) {
        0 => e.va,                                                    // start of the region
        1 => e.va.wrapping_add(e.len).wrapping_sub(len as u64),       // ends exactly at the region's end
        2 => e.va.wrapping_add(e.len).wrapping_sub(len as u64).wrapping_add(1), // one byte past the end
        3 => e.va.wrapping_sub(1),                                    // one byte before the start
        4 => u64::MAX - rng.gen_range(0..len as u64 + 2),             // va + len around 2^64
        5 => rng.gen(),
        _ => e.va.wrapping_add(rng.gen_range(0..e.len.max(1))),
    };
    (idx << 8 | tag as u32, pd, va, len, need)
}

#[test]
fn key_cache_rust_hdl_and_verilator_in_lockstep_match_rxe_rules_on_20000_lookups() {
    let mut hdl = {
        let mut k = Box::<KeyCache<N, AW>>::default();
        k.connect_all();
        RustHdlKc(k)
    };
    let mut vl = VerilatorKc(VKeyCache::new());
    let mut rng = SmallRng::seed_from_u64(0x4B43);
    let mut table = vec![Entry::default(); N];
    // the working set: 48 indexes spread over the table, including the first and the last
    let mut hot: Vec<usize> = (0..46).map(|_| rng.gen_range(0..N)).collect();
    hot.extend([0, N - 1]);
    let mut pending: VecDeque<Option<(KcErr, u64, u32)>> = VecDeque::new();
    let mut seen = [0u64; 6];
    let (mut lookups, mut zero_len_bad_key, mut overflow, mut exact_end, mut dma_checked) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut cycle = 0u64;
    while lookups < 20_000 || !pending.iter().all(|p| p.is_none()) {
        let mut i = Inputs::default();
        // driver: first fill the working set, then random writes (1 in 8) and invalidates (1 in 40)
        let (wr, inv, wi) = if cycle < hot.len() as u64 {
            (true, false, hot[cycle as usize])
        } else {
            let wi = if rng.gen_ratio(7, 8) { hot[rng.gen_range(0..hot.len())] } else { rng.gen_range(0..N) };
            (rng.gen_ratio(1, 8), rng.gen_ratio(1, 40), wi)
        };
        let ne = random_entry(&mut rng);
        i.wr_en = wr;
        i.inv_en = inv;
        i.wr_index = wi as u64;
        i.wr_valid = ne.valid;
        i.wr_tag = ne.tag;
        i.wr_pd = ne.pd;
        i.wr_access = ne.access;
        i.wr_va = ne.va;
        i.wr_len = ne.len;
        i.wr_base = ne.base;
        // lookup (9 in 10 cycles while the quota lasts)
        let lv = lookups < 20_000 && cycle >= 8 && rng.gen_ratio(9, 10);
        let (key, pd, va, len, need) = random_lookup(&mut rng, &table, &hot);
        i.lk_valid = lv;
        i.lk_key = key;
        i.lk_pd = pd;
        i.lk_va = va;
        i.lk_len = len;
        i.lk_access = need;
        i.lk_remote = rng.gen();

        let a = hdl.drive(&i);
        let b = vl.drive(&i);
        assert_eq!(a, b, "rust-hdl and Verilator differ at cycle {cycle} (valid, ok, err, dma)");
        let want = if pending.len() == LATENCY { pending.pop_front().unwrap() } else { None };
        assert_eq!(a.0, want.is_some(), "res_valid at cycle {cycle}");
        if let Some((err, dma, l)) = want {
            let got = KcErr::from_code(a.2).unwrap_or_else(|| panic!("bad error code {} at cycle {cycle}", a.2));
            assert_eq!(got, err, "cycle {cycle}: error code");
            assert_eq!(a.1, err == KcErr::Ok, "cycle {cycle}: ok");
            if err == KcErr::Ok && l != 0 {
                assert_eq!(a.3, dma, "cycle {cycle}: DMA address");
                dma_checked += 1;
            }
        }
        // the lookup sees the table as it was before this cycle's write
        pending.push_back(lv.then(|| {
            let (err, dma) = reference(&table, key, pd, va, len, need);
            seen[err as usize] += 1;
            let idx = (key >> 8) as usize;
            if len == 0 && (idx >= N || table[idx].tag != key as u8 || !table[idx].valid) {
                zero_len_bad_key += 1;
            }
            if va.checked_add(len as u64).is_none() {
                overflow += 1;
            }
            if idx < N && err == KcErr::Ok && len != 0 && va.wrapping_add(len as u64) == table[idx].va.wrapping_add(table[idx].len) {
                exact_end += 1;
            }
            (err, dma, len)
        }));
        if lv {
            lookups += 1;
        }
        if wr {
            table[wi] = ne;
        }
        if inv {
            table[wi].valid = false;
        }
        hdl.tick();
        vl.tick();
        cycle += 1;
    }
    eprintln!(
        "{lookups} lookups in {cycle} cycles; results ok/key/invalid/pd/access/bounds = {seen:?}; {dma_checked} DMA \
         addresses; {zero_len_bad_key} zero-length with a bad key; {overflow} va+len overflows; {exact_end} ending \
         exactly at the region end"
    );
    assert!(seen.iter().all(|&n| n >= 200), "every outcome occurs often: {seen:?}");
    assert!(zero_len_bad_key >= 20 && overflow >= 50 && exact_end >= 100);
}
