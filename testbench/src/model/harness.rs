//! Test harness: two model devices over a [`Link`] with connected QPs, used by the `model_*` tests and usable
//! by any scoreboard that needs a ready-made pair.

use super::device::{Device, DeviceConfig};
use super::link::{run_pair, Link, LinkConfig, RunResult};
use super::mr::{AccessFlags, Pd};
use super::qp::{QpState, QpType};
use super::verbs::*;

/// Connection options for [`connect`] / [`Pair::connect`].
#[derive(Clone, Copy, Debug)]
pub struct ConnOpts {
    pub qp_type: QpType,
    pub path_mtu: u32,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub min_rnr_timer: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub access: AccessFlags,
    pub qkey: u32,
}

impl Default for ConnOpts {
    fn default() -> Self {
        ConnOpts {
            qp_type: QpType::Rc,
            path_mtu: 1024,
            timeout: 8,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 1,
            max_rd_atomic: 16,
            max_dest_rd_atomic: 16,
            access: AccessFlags::ALL,
            qkey: 0x1111_1111,
        }
    }
}

/// Bring a QP from RESET to RTS against `remote_qpn` at `av` (RESET→INIT→RTR→RTS).
pub fn connect(
    dev: &mut Device,
    qpn: u32,
    remote_qpn: u32,
    av: AddressVector,
    o: &ConnOpts,
    sq_psn: u32,
    rq_psn: u32,
) -> Result<(), VerbsError> {
    dev.modify_qp(
        qpn,
        &QpAttr {
            qp_state: Some(QpState::Init),
            qp_access_flags: Some(o.access),
            qkey: Some(o.qkey),
            ..Default::default()
        },
    )?;
    let ud = o.qp_type == QpType::Ud;
    dev.modify_qp(
        qpn,
        &QpAttr {
            qp_state: Some(QpState::Rtr),
            path_mtu: Some(o.path_mtu),
            dest_qp_num: (!ud).then_some(remote_qpn),
            rq_psn: (!ud).then_some(rq_psn),
            max_dest_rd_atomic: Some(o.max_dest_rd_atomic),
            min_rnr_timer: Some(o.min_rnr_timer),
            av: (!ud).then_some(av),
            ..Default::default()
        },
    )?;
    dev.modify_qp(
        qpn,
        &QpAttr {
            qp_state: Some(QpState::Rts),
            sq_psn: Some(sq_psn),
            timeout: Some(o.timeout),
            retry_cnt: Some(o.retry_cnt),
            rnr_retry: Some(o.rnr_retry),
            max_rd_atomic: Some(o.max_rd_atomic),
            ..Default::default()
        },
    )
}

/// Two devices over a link.
pub struct Pair {
    pub a: Device,
    pub b: Device,
    pub link: Link,
    pub now: u64,
    pub pd_a: Pd,
    pub pd_b: Pd,
    pub cq_a: Cq,
    pub cq_b: Cq,
}

impl Pair {
    /// Devices 10.0.0.1 (a) and 10.0.0.2 (b), one PD and one CQ each.
    pub fn new(link: LinkConfig, seed: u64) -> Self {
        let mut a = Device::new(DeviceConfig::simple(1));
        let mut b = Device::new(DeviceConfig::simple(2));
        let pd_a = a.alloc_pd();
        let pd_b = b.alloc_pd();
        let cq_a = a.create_cq(65536);
        let cq_b = b.create_cq(65536);
        Pair {
            a,
            b,
            link: Link::new(link, seed),
            now: 0,
            pd_a,
            pd_b,
            cq_a,
            cq_b,
        }
    }

    /// Create one QP on each side and connect them; returns (qpn on a, qpn on b).
    pub fn connect(&mut self, o: &ConnOpts, psn_a: u32, psn_b: u32) -> (u32, u32) {
        let init = |cq| QpInitAttr {
            qp_type: o.qp_type,
            send_cq: cq,
            recv_cq: cq,
            cap: QpCap::default(),
            sq_sig_all: false,
        };
        let qa = self.a.create_qp(self.pd_a, init(self.cq_a)).expect("create qp a");
        let qb = self.b.create_qp(self.pd_b, init(self.cq_b)).expect("create qp b");
        let av_b = self.b.av_to_me();
        let av_a = self.a.av_to_me();
        connect(&mut self.a, qa, qb, av_b, o, psn_a, psn_b).expect("connect a");
        connect(&mut self.b, qb, qa, av_a, o, psn_b, psn_a).expect("connect b");
        (qa, qb)
    }

    /// Run until idle or `limit_ns` of virtual time from now.
    pub fn run_for(&mut self, limit_ns: u64) -> RunResult {
        let r = run_pair(&mut self.a, &mut self.b, &mut self.link, self.now, self.now + limit_ns);
        self.now = r.now_ns;
        r
    }

    /// Run until idle (at most 100 s of virtual time).
    pub fn run(&mut self) -> RunResult {
        self.run_for(100_000_000_000)
    }
}
