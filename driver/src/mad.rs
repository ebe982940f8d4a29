//! Management datagrams on QP1 and the Communication Management (CM) messages they carry: the common MAD
//! header and the eleven CM messages (REQ, MRA, REJ, REP, RTU, DREQ, DREP, SIDR_REQ, SIDR_REP, LAP, APR),
//! parsed from and built to their 256 bytes, field for field as IBA vol. 1 chapter 12 lays them out (the
//! offsets and widths as Linux's `include/rdma/ibta_vol1_c12.h` writes the tables; `docs/cm.md`), and the
//! rdma_cm header that starts a REQ's and SIDR_REQ's private data.
//!
//! Every field is big-endian; a field is (byte offset in the message, first bit counted from the most
//! significant bit of that byte, width in bits). Bits no field names are reserved: parse ignores them and
//! build writes zeros. `testbench/data/rxe-cm.pcap` (real rxe traffic: rping, udaddy, ucmatose and a REQ
//! nobody listens for) rebuilds byte for byte.

use std::net::Ipv4Addr;

use thiserror::Error;

/// Why a MAD (or its rdma_cm header) could not be read: it ends before a header or message is complete.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum MadError {
    #[error("truncated {what}: need {need} bytes, have {have}")]
    Truncated { what: &'static str, need: usize, have: usize },
}

fn need(buf: &[u8], need: usize, what: &'static str) -> Result<(), MadError> {
    if buf.len() < need {
        Err(MadError::Truncated { what, need, have: buf.len() })
    } else {
        Ok(())
    }
}

/// A MAD is 256 bytes on QP1 (no RMPP for CM): a 24-byte common header and 232 bytes of message.
pub const MAD_LEN: usize = 256;
pub const MAD_HDR_LEN: usize = 24;
pub const CM_MSG_LEN: usize = MAD_LEN - MAD_HDR_LEN;
pub const MAD_BASE_VERSION: u8 = 1;
/// Management class of the CM, and the class version Linux's ib_cm speaks.
pub const MGMT_CLASS_CM: u8 = 0x07;
pub const CM_CLASS_VERSION: u8 = 2;
/// Every CM message is sent with method Send.
pub const MAD_METHOD_SEND: u8 = 0x03;
/// The GSI's Q_Key: every datagram to or from QP1 carries it.
pub use crate::host::GSI_QKEY;
/// rdma_cm's Q_Key for UD QPs (the Q_Key a SIDR_REP hands out).
pub const RDMA_UDP_QKEY: u32 = 0x0123_4567;
/// rdma_cm port spaces: a service ID is `ps << 16 | port`.
pub const RDMA_PS_TCP: u16 = 0x0106;
pub const RDMA_PS_UDP: u16 = 0x0111;
pub const RDMA_PS_IB: u16 = 0x013F;

/// The service ID rdma_cm listens on and connects to for `port` in port space `ps`.
pub fn service_id(ps: u16, port: u16) -> u64 {
    u64::from(ps) << 16 | u64::from(port)
}

/// A field's value from big-endian bytes: `width` bits from bit `bit` (0 = most significant) of byte `off`.
fn get(b: &[u8], off: usize, bit: u32, width: u32) -> u64 {
    let mut w = [0u8; 8];
    let n = (b.len() - off).min(8);
    w[..n].copy_from_slice(&b[off..off + n]);
    (u64::from_be_bytes(w) << bit) >> (64 - width)
}

/// Write a field's value (its high bits beyond `width` dropped); the other bits keep theirs.
fn put(b: &mut [u8], off: usize, bit: u32, width: u32, v: u64) {
    let mut w = [0u8; 8];
    let n = (b.len() - off).min(8);
    w[..n].copy_from_slice(&b[off..off + n]);
    let mask = (u64::MAX >> (64 - width)) << (64 - width - bit);
    let x = (u64::from_be_bytes(w) & !mask) | ((v << (64 - width - bit)) & mask);
    b[off..off + n].copy_from_slice(&x.to_be_bytes()[..n]);
}

/// The common MAD header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct MadHeader {
    pub base_version: u8,
    pub mgmt_class: u8,
    pub class_version: u8,
    pub method: u8,
    pub status: u16,
    pub class_specific: u16,
    pub tid: u64,
    pub attr_id: u16,
    pub attr_mod: u32,
}

impl MadHeader {
    /// A CM message's header: base version 1, class CM, class version 2, method Send.
    pub fn cm(attr_id: u16, tid: u64) -> Self {
        MadHeader {
            base_version: MAD_BASE_VERSION,
            mgmt_class: MGMT_CLASS_CM,
            class_version: CM_CLASS_VERSION,
            method: MAD_METHOD_SEND,
            tid,
            attr_id,
            ..Default::default()
        }
    }

    pub fn parse(b: &[u8]) -> Result<Self, MadError> {
        need(b, MAD_HDR_LEN, "MAD header")?;
        let be16 = |o: usize| u16::from_be_bytes([b[o], b[o + 1]]);
        Ok(MadHeader {
            base_version: b[0],
            mgmt_class: b[1],
            class_version: b[2],
            method: b[3],
            status: be16(4),
            class_specific: be16(6),
            tid: u64::from_be_bytes(b[8..16].try_into().unwrap()),
            attr_id: be16(16),
            attr_mod: u32::from_be_bytes(b[20..24].try_into().unwrap()),
        })
    }

    pub fn build(&self, out: &mut [u8]) {
        out[0] = self.base_version;
        out[1] = self.mgmt_class;
        out[2] = self.class_version;
        out[3] = self.method;
        out[4..6].copy_from_slice(&self.status.to_be_bytes());
        out[6..8].copy_from_slice(&self.class_specific.to_be_bytes());
        out[8..16].copy_from_slice(&self.tid.to_be_bytes());
        out[16..18].copy_from_slice(&self.attr_id.to_be_bytes());
        out[18..20].fill(0);
        out[20..24].copy_from_slice(&self.attr_mod.to_be_bytes());
    }

    /// A CM message as Linux's ib_cm takes it: base version 1, class CM, class version 2, method Send.
    pub fn is_cm(&self) -> bool {
        self.base_version == MAD_BASE_VERSION
            && self.mgmt_class == MGMT_CLASS_CM
            && self.class_version == CM_CLASS_VERSION
            && self.method == MAD_METHOD_SEND
    }
}

/// One CM message type: its fields (integers at (offset, bit, width), byte strings at (offset, length)), parse
/// from and build into the 232-byte message. Declared once per message below.
macro_rules! cm_message {
    (
        $(#[$m:meta])*
        $name:ident = $attr:expr;
        ints { $( $(#[$fm:meta])* $f:ident : $t:ty = ($off:expr, $bit:expr, $w:expr) ),* $(,)? }
        bytes { $( $(#[$bm:meta])* $bf:ident : $n:expr => $boff:expr ),* $(,)? }
    ) => {
        $(#[$m])*
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct $name {
            $( $(#[$fm])* pub $f: $t, )*
            $( $(#[$bm])* pub $bf: [u8; $n], )*
        }

        impl Default for $name {
            fn default() -> Self {
                $name { $( $f: 0, )* $( $bf: [0; $n], )* }
            }
        }

        impl $name {
            /// The MAD attribute ID of this message.
            pub const ATTR_ID: u16 = $attr;
            /// Every field's place: (name, byte offset, first bit from the MSB, width in bits).
            pub const FIELDS: &'static [(&'static str, usize, u32, u32)] =
                &[ $( (stringify!($f), $off, $bit, $w), )* $( (stringify!($bf), $boff, 0, 8 * $n), )* ];

            pub fn parse(b: &[u8]) -> Result<Self, MadError> {
                need(b, CM_MSG_LEN, stringify!($name))?;
                Ok($name {
                    $( $f: get(b, $off, $bit, $w) as $t, )*
                    $( $bf: b[$boff..$boff + $n].try_into().unwrap(), )*
                })
            }

            pub fn build(&self, out: &mut [u8]) {
                out[..CM_MSG_LEN].fill(0);
                $( put(out, $off, $bit, $w, self.$f as u64); )*
                $( out[$boff..$boff + $n].copy_from_slice(&self.$bf); )*
            }
        }
    };
}

cm_message! {
    /// REQ: a request for a connection (RC or UC), with the primary and alternate paths.
    CmReq = 0x0010;
    ints {
        local_comm_id: u32 = (0, 0, 32),
        /// ECE vendor ID (Linux; IBA reserved): 0.
        vendor_id: u32 = (5, 0, 24),
        service_id: u64 = (8, 0, 64),
        local_ca_guid: u64 = (16, 0, 64),
        local_qkey: u32 = (28, 0, 32),
        local_qpn: u32 = (32, 0, 24),
        responder_resources: u8 = (35, 0, 8),
        local_eecn: u32 = (36, 0, 24),
        initiator_depth: u8 = (39, 0, 8),
        remote_eecn: u32 = (40, 0, 24),
        remote_cm_response_timeout: u8 = (43, 0, 5),
        /// 0 RC, 1 UC, 3 extended (XRC).
        transport_service_type: u8 = (43, 5, 2),
        end_to_end_flow_control: u8 = (43, 7, 1),
        starting_psn: u32 = (44, 0, 24),
        local_cm_response_timeout: u8 = (47, 0, 5),
        retry_count: u8 = (47, 5, 3),
        pkey: u16 = (48, 0, 16),
        /// The path MTU as IBA codes it (1 = 256 ... 5 = 4096).
        path_mtu: u8 = (50, 0, 4),
        rdc_exists: u8 = (50, 4, 1),
        rnr_retry_count: u8 = (50, 5, 3),
        max_cm_retries: u8 = (51, 0, 4),
        srq: u8 = (51, 4, 1),
        extended_transport_type: u8 = (51, 5, 3),
        primary_local_lid: u16 = (52, 0, 16),
        primary_remote_lid: u16 = (54, 0, 16),
        primary_flow_label: u32 = (88, 0, 20),
        primary_packet_rate: u8 = (91, 2, 6),
        primary_traffic_class: u8 = (92, 0, 8),
        primary_hop_limit: u8 = (93, 0, 8),
        primary_sl: u8 = (94, 0, 4),
        primary_subnet_local: u8 = (94, 4, 1),
        primary_local_ack_timeout: u8 = (95, 0, 5),
        alternate_local_lid: u16 = (96, 0, 16),
        alternate_remote_lid: u16 = (98, 0, 16),
        alternate_flow_label: u32 = (132, 0, 20),
        alternate_packet_rate: u8 = (135, 2, 6),
        alternate_traffic_class: u8 = (136, 0, 8),
        alternate_hop_limit: u8 = (137, 0, 8),
        alternate_sl: u8 = (138, 0, 4),
        alternate_subnet_local: u8 = (138, 4, 1),
        alternate_local_ack_timeout: u8 = (139, 0, 5),
        sap_supported: u8 = (139, 5, 1),
    }
    bytes {
        primary_local_gid: 16 => 56,
        primary_remote_gid: 16 => 72,
        alternate_local_gid: 16 => 100,
        alternate_remote_gid: 16 => 116,
        private_data: 92 => 140,
    }
}

cm_message! {
    /// MRA: "message received, answer later" (service timeout of the answer).
    CmMra = 0x0011;
    ints {
        local_comm_id: u32 = (0, 0, 32),
        remote_comm_id: u32 = (4, 0, 32),
        /// 0 REQ, 1 REP, 2 LAP.
        message_mraed: u8 = (8, 0, 2),
        service_timeout: u8 = (9, 0, 5),
    }
    bytes { private_data: 222 => 10 }
}

cm_message! {
    /// REJ: the end of a connection attempt, with the reason.
    CmRej = 0x0012;
    ints {
        local_comm_id: u32 = (0, 0, 32),
        remote_comm_id: u32 = (4, 0, 32),
        /// 0 REQ, 1 REP, 2 other.
        message_rejected: u8 = (8, 0, 2),
        reject_info_length: u8 = (9, 0, 7),
        reason: u16 = (10, 0, 16),
    }
    bytes {
        /// Additional reject information.
        ari: 72 => 12,
        private_data: 148 => 84,
    }
}

cm_message! {
    /// REP: the passive side's answer to a REQ.
    CmRep = 0x0013;
    ints {
        local_comm_id: u32 = (0, 0, 32),
        remote_comm_id: u32 = (4, 0, 32),
        local_qkey: u32 = (8, 0, 32),
        local_qpn: u32 = (12, 0, 24),
        vendor_id_h: u8 = (15, 0, 8),
        local_eecn: u32 = (16, 0, 24),
        vendor_id_m: u8 = (19, 0, 8),
        starting_psn: u32 = (20, 0, 24),
        vendor_id_l: u8 = (23, 0, 8),
        responder_resources: u8 = (24, 0, 8),
        initiator_depth: u8 = (25, 0, 8),
        target_ack_delay: u8 = (26, 0, 5),
        failover_accepted: u8 = (26, 5, 2),
        end_to_end_flow_control: u8 = (26, 7, 1),
        rnr_retry_count: u8 = (27, 0, 3),
        srq: u8 = (27, 3, 1),
        local_ca_guid: u64 = (28, 0, 64),
    }
    bytes { private_data: 196 => 36 }
}

cm_message! {
    /// RTU: ready to use (the active side's answer to a REP).
    CmRtu = 0x0014;
    ints {
        local_comm_id: u32 = (0, 0, 32),
        remote_comm_id: u32 = (4, 0, 32),
    }
    bytes { private_data: 224 => 8 }
}

cm_message! {
    /// DREQ: a request to tear a connection down (the receiver's QPN for validation).
    CmDreq = 0x0015;
    ints {
        local_comm_id: u32 = (0, 0, 32),
        remote_comm_id: u32 = (4, 0, 32),
        remote_qpn: u32 = (8, 0, 24),
    }
    bytes { private_data: 220 => 12 }
}

cm_message! {
    /// DREP: the answer to a DREQ.
    CmDrep = 0x0016;
    ints {
        local_comm_id: u32 = (0, 0, 32),
        remote_comm_id: u32 = (4, 0, 32),
    }
    bytes { private_data: 224 => 8 }
}

cm_message! {
    /// SIDR_REQ: service ID resolution for UD (which QPN and Q_Key serve this service ID).
    CmSidrReq = 0x0017;
    ints {
        request_id: u32 = (0, 0, 32),
        pkey: u16 = (4, 0, 16),
        service_id: u64 = (8, 0, 64),
    }
    bytes { private_data: 216 => 16 }
}

cm_message! {
    /// SIDR_REP: the answer to a SIDR_REQ (status 0: the QPN and Q_Key are valid).
    CmSidrRep = 0x0018;
    ints {
        request_id: u32 = (0, 0, 32),
        /// 0 valid, 1 service ID not supported, 2 rejected, 3 no QP, 4 redirect, 5 unsupported version.
        status: u8 = (4, 0, 8),
        additional_info_length: u8 = (5, 0, 8),
        vendor_id_h: u16 = (6, 0, 16),
        qpn: u32 = (8, 0, 24),
        vendor_id_l: u8 = (11, 0, 8),
        service_id: u64 = (12, 0, 64),
        qkey: u32 = (20, 0, 32),
    }
    bytes {
        additional_info: 72 => 24,
        private_data: 136 => 96,
    }
}

cm_message! {
    /// LAP: load an alternate path (path migration).
    CmLap = 0x0019;
    ints {
        local_comm_id: u32 = (0, 0, 32),
        remote_comm_id: u32 = (4, 0, 32),
        /// The sender's GSI Q_Key (IBA; Linux names no field here).
        local_cm_qkey: u32 = (8, 0, 32),
        remote_qpn: u32 = (12, 0, 24),
        remote_cm_response_timeout: u8 = (15, 0, 5),
        alternate_local_lid: u16 = (20, 0, 16),
        alternate_remote_lid: u16 = (22, 0, 16),
        alternate_flow_label: u32 = (56, 0, 20),
        alternate_traffic_class: u8 = (59, 0, 8),
        alternate_hop_limit: u8 = (60, 0, 8),
        alternate_packet_rate: u8 = (61, 2, 6),
        alternate_sl: u8 = (62, 0, 4),
        alternate_subnet_local: u8 = (62, 4, 1),
        alternate_local_ack_timeout: u8 = (63, 0, 5),
    }
    bytes {
        alternate_local_gid: 16 => 24,
        alternate_remote_gid: 16 => 40,
        private_data: 168 => 64,
    }
}

cm_message! {
    /// APR: the answer to a LAP.
    CmApr = 0x001A;
    ints {
        local_comm_id: u32 = (0, 0, 32),
        remote_comm_id: u32 = (4, 0, 32),
        additional_info_length: u8 = (8, 0, 8),
        /// 0 loaded, 1 invalid comm ID, 2 unsupported, 3 rejected, ...
        ap_status: u8 = (9, 0, 8),
    }
    bytes {
        additional_info: 72 => 12,
        private_data: 148 => 84,
    }
}

/// A CM message of any type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CmMsg {
    Req(CmReq),
    Mra(CmMra),
    Rej(CmRej),
    Rep(CmRep),
    Rtu(CmRtu),
    Dreq(CmDreq),
    Drep(CmDrep),
    SidrReq(CmSidrReq),
    SidrRep(CmSidrRep),
    Lap(CmLap),
    Apr(CmApr),
}

impl CmMsg {
    /// The message for attribute `attr_id` from the 232 bytes after the MAD header; `None` for an attribute
    /// that is no CM message.
    pub fn parse(attr_id: u16, b: &[u8]) -> Result<Option<Self>, MadError> {
        Ok(Some(match attr_id {
            CmReq::ATTR_ID => CmMsg::Req(CmReq::parse(b)?),
            CmMra::ATTR_ID => CmMsg::Mra(CmMra::parse(b)?),
            CmRej::ATTR_ID => CmMsg::Rej(CmRej::parse(b)?),
            CmRep::ATTR_ID => CmMsg::Rep(CmRep::parse(b)?),
            CmRtu::ATTR_ID => CmMsg::Rtu(CmRtu::parse(b)?),
            CmDreq::ATTR_ID => CmMsg::Dreq(CmDreq::parse(b)?),
            CmDrep::ATTR_ID => CmMsg::Drep(CmDrep::parse(b)?),
            CmSidrReq::ATTR_ID => CmMsg::SidrReq(CmSidrReq::parse(b)?),
            CmSidrRep::ATTR_ID => CmMsg::SidrRep(CmSidrRep::parse(b)?),
            CmLap::ATTR_ID => CmMsg::Lap(CmLap::parse(b)?),
            CmApr::ATTR_ID => CmMsg::Apr(CmApr::parse(b)?),
            _ => return Ok(None),
        }))
    }

    pub fn attr_id(&self) -> u16 {
        match self {
            CmMsg::Req(_) => CmReq::ATTR_ID,
            CmMsg::Mra(_) => CmMra::ATTR_ID,
            CmMsg::Rej(_) => CmRej::ATTR_ID,
            CmMsg::Rep(_) => CmRep::ATTR_ID,
            CmMsg::Rtu(_) => CmRtu::ATTR_ID,
            CmMsg::Dreq(_) => CmDreq::ATTR_ID,
            CmMsg::Drep(_) => CmDrep::ATTR_ID,
            CmMsg::SidrReq(_) => CmSidrReq::ATTR_ID,
            CmMsg::SidrRep(_) => CmSidrRep::ATTR_ID,
            CmMsg::Lap(_) => CmLap::ATTR_ID,
            CmMsg::Apr(_) => CmApr::ATTR_ID,
        }
    }

    pub fn name(&self) -> &'static str {
        attr_name(self.attr_id()).unwrap_or("?")
    }

    pub fn build(&self, out: &mut [u8]) {
        match self {
            CmMsg::Req(m) => m.build(out),
            CmMsg::Mra(m) => m.build(out),
            CmMsg::Rej(m) => m.build(out),
            CmMsg::Rep(m) => m.build(out),
            CmMsg::Rtu(m) => m.build(out),
            CmMsg::Dreq(m) => m.build(out),
            CmMsg::Drep(m) => m.build(out),
            CmMsg::SidrReq(m) => m.build(out),
            CmMsg::SidrRep(m) => m.build(out),
            CmMsg::Lap(m) => m.build(out),
            CmMsg::Apr(m) => m.build(out),
        }
    }

    /// The whole MAD: a CM header with `tid` and this message.
    pub fn mad(&self, tid: u64) -> [u8; MAD_LEN] {
        let mut b = [0u8; MAD_LEN];
        MadHeader::cm(self.attr_id(), tid).build(&mut b);
        self.build(&mut b[MAD_HDR_LEN..]);
        b
    }
}

/// The CM attribute's name (REQ, REP, ...), `None` for another attribute.
pub fn attr_name(attr_id: u16) -> Option<&'static str> {
    Some(match attr_id {
        CmReq::ATTR_ID => "REQ",
        CmMra::ATTR_ID => "MRA",
        CmRej::ATTR_ID => "REJ",
        CmRep::ATTR_ID => "REP",
        CmRtu::ATTR_ID => "RTU",
        CmDreq::ATTR_ID => "DREQ",
        CmDrep::ATTR_ID => "DREP",
        CmSidrReq::ATTR_ID => "SIDR_REQ",
        CmSidrRep::ATTR_ID => "SIDR_REP",
        CmLap::ATTR_ID => "LAP",
        CmApr::ATTR_ID => "APR",
        _ => return None,
    })
}

/// A MAD as it comes off QP1: its header and, for a CM message of a known attribute, the message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mad {
    pub hdr: MadHeader,
    pub cm: Option<CmMsg>,
}

impl Mad {
    /// Parse the 256 bytes of a MAD (the UD payload on QP1).
    pub fn parse(b: &[u8]) -> Result<Self, MadError> {
        need(b, MAD_LEN, "MAD")?;
        let hdr = MadHeader::parse(b)?;
        let cm = if hdr.mgmt_class == MGMT_CLASS_CM { CmMsg::parse(hdr.attr_id, &b[MAD_HDR_LEN..])? } else { None };
        Ok(Mad { hdr, cm })
    }

    /// One line: class, method, attribute, TID, and the message's identifying fields.
    pub fn summary(&self) -> String {
        let h = &self.hdr;
        let head = format!("MAD class 0x{:02x} v{} method 0x{:02x} tid 0x{:016x}", h.mgmt_class, h.class_version, h.method, h.tid);
        let body = match &self.cm {
            None => format!("attr 0x{:04x}", h.attr_id),
            Some(CmMsg::Req(m)) => format!(
                "CM REQ local_id 0x{:08x} sid 0x{:016x} qpn 0x{:06x} psn 0x{:06x} mtu {} resp_res {} init_depth {} retry {} rnr {}",
                m.local_comm_id, m.service_id, m.local_qpn, m.starting_psn, m.path_mtu, m.responder_resources, m.initiator_depth, m.retry_count, m.rnr_retry_count
            ),
            Some(CmMsg::Rep(m)) => format!(
                "CM REP local_id 0x{:08x} remote_id 0x{:08x} qpn 0x{:06x} psn 0x{:06x} resp_res {} init_depth {}",
                m.local_comm_id, m.remote_comm_id, m.local_qpn, m.starting_psn, m.responder_resources, m.initiator_depth
            ),
            Some(CmMsg::Rej(m)) => format!(
                "CM REJ local_id 0x{:08x} remote_id 0x{:08x} reason {} ({}) rejected {}",
                m.local_comm_id, m.remote_comm_id, m.reason, rej_reason_name(m.reason), ["REQ", "REP", "other", "?"][usize::from(m.message_rejected & 3)]
            ),
            Some(CmMsg::Mra(m)) => format!("CM MRA local_id 0x{:08x} remote_id 0x{:08x} service_timeout {}", m.local_comm_id, m.remote_comm_id, m.service_timeout),
            Some(CmMsg::Rtu(m)) => format!("CM RTU local_id 0x{:08x} remote_id 0x{:08x}", m.local_comm_id, m.remote_comm_id),
            Some(CmMsg::Dreq(m)) => format!("CM DREQ local_id 0x{:08x} remote_id 0x{:08x} remote_qpn 0x{:06x}", m.local_comm_id, m.remote_comm_id, m.remote_qpn),
            Some(CmMsg::Drep(m)) => format!("CM DREP local_id 0x{:08x} remote_id 0x{:08x}", m.local_comm_id, m.remote_comm_id),
            Some(CmMsg::SidrReq(m)) => format!("CM SIDR_REQ request_id 0x{:08x} sid 0x{:016x}", m.request_id, m.service_id),
            Some(CmMsg::SidrRep(m)) => format!(
                "CM SIDR_REP request_id 0x{:08x} status {} qpn 0x{:06x} qkey 0x{:08x}",
                m.request_id, m.status, m.qpn, m.qkey
            ),
            Some(CmMsg::Lap(m)) => format!("CM LAP local_id 0x{:08x} remote_id 0x{:08x}", m.local_comm_id, m.remote_comm_id),
            Some(CmMsg::Apr(m)) => format!("CM APR local_id 0x{:08x} remote_id 0x{:08x} status {}", m.local_comm_id, m.remote_comm_id, m.ap_status),
        };
        format!("{head} {body}")
    }
}

/// REJ reasons (IBA table "REJ reasons"; Linux `enum ib_cm_rej_reason`).
pub fn rej_reason_name(r: u16) -> &'static str {
    match r {
        1 => "no QP",
        2 => "no EEC",
        3 => "no resources",
        4 => "timeout",
        5 => "unsupported",
        6 => "invalid comm ID",
        7 => "invalid comm instance",
        8 => "invalid service ID",
        9 => "invalid transport type",
        10 => "stale connection",
        11 => "RDC does not exist",
        12 => "invalid GID",
        13 => "invalid LID",
        14 => "invalid SL",
        15 => "invalid traffic class",
        16 => "invalid hop limit",
        17 => "invalid packet rate",
        26 => "invalid path MTU",
        27 => "insufficient responder resources",
        28 => "consumer reject",
        29 => "invalid RNR retry",
        30 => "duplicate local comm ID",
        31 => "invalid class version",
        _ => "other",
    }
}

/// The rdma_cm header: the first 36 bytes of a REQ's and SIDR_REQ's private data (IPv4 addresses as 12 zero
/// bytes and the address, not IPv4-mapped).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmaHdr {
    pub cma_version: u8,
    /// 4 or 6 (bits 7:4 of byte 1).
    pub ip_version: u8,
    pub src_port: u16,
    pub src: [u8; 16],
    pub dst: [u8; 16],
}

pub const CMA_HDR_LEN: usize = 36;

impl CmaHdr {
    /// The header of an IPv4 connection from `src:src_port` to `dst`.
    pub fn v4(src: Ipv4Addr, src_port: u16, dst: Ipv4Addr) -> Self {
        let pad = |a: Ipv4Addr| {
            let mut b = [0u8; 16];
            b[12..].copy_from_slice(&a.octets());
            b
        };
        CmaHdr { cma_version: 0, ip_version: 4, src_port, src: pad(src), dst: pad(dst) }
    }

    pub fn parse(b: &[u8]) -> Result<Self, MadError> {
        need(b, CMA_HDR_LEN, "rdma_cm header")?;
        Ok(CmaHdr {
            cma_version: b[0],
            ip_version: b[1] >> 4,
            src_port: u16::from_be_bytes([b[2], b[3]]),
            src: b[4..20].try_into().unwrap(),
            dst: b[20..36].try_into().unwrap(),
        })
    }

    pub fn build(&self, out: &mut [u8]) {
        out[0] = self.cma_version;
        out[1] = self.ip_version << 4;
        out[2..4].copy_from_slice(&self.src_port.to_be_bytes());
        out[4..20].copy_from_slice(&self.src);
        out[20..36].copy_from_slice(&self.dst);
    }

    /// The IPv4 addresses, when the header is IPv4 with zero-padded addresses.
    pub fn v4_addrs(&self) -> Option<(Ipv4Addr, Ipv4Addr)> {
        let a = |b: &[u8; 16]| (b[..12] == [0; 12]).then(|| Ipv4Addr::new(b[12], b[13], b[14], b[15]));
        (self.ip_version == 4).then_some(())?;
        Some((a(&self.src)?, a(&self.dst)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each message's field table against IBA's (as `ibta_vol1_c12.h` writes it): a field set to all ones
    /// alone sets exactly its own bits, every field lies inside the 232 bytes, no two fields share a bit, and
    /// the private data ends the message.
    #[test]
    fn every_field_sits_where_the_table_puts_it() {
        fn check(name: &str, fields: &[(&str, usize, u32, u32)], private: (usize, usize)) {
            let mut owner = vec![None::<&str>; CM_MSG_LEN * 8];
            for &(f, off, bit, w) in fields {
                let first = off * 8 + bit as usize;
                assert!(first + w as usize <= CM_MSG_LEN * 8, "{name}.{f} beyond the message");
                for (i, o) in owner.iter_mut().enumerate().skip(first).take(w as usize) {
                    assert!(o.is_none(), "{name}.{f} overlaps {} at bit {i}", o.unwrap());
                    *o = Some(f);
                }
            }
            assert_eq!(fields.iter().find(|f| f.0 == "private_data").map(|f| (f.1, f.3 as usize / 8)), Some(private), "{name}");
            assert_eq!(private.0 + private.1, CM_MSG_LEN, "{name}: private data ends the message");
        }
        check("REQ", CmReq::FIELDS, (140, 92));
        check("MRA", CmMra::FIELDS, (10, 222));
        check("REJ", CmRej::FIELDS, (84, 148));
        check("REP", CmRep::FIELDS, (36, 196));
        check("RTU", CmRtu::FIELDS, (8, 224));
        check("DREQ", CmDreq::FIELDS, (12, 220));
        check("DREP", CmDrep::FIELDS, (8, 224));
        check("SIDR_REQ", CmSidrReq::FIELDS, (16, 216));
        check("SIDR_REP", CmSidrRep::FIELDS, (96, 136));
        check("LAP", CmLap::FIELDS, (64, 168));
        check("APR", CmApr::FIELDS, (84, 148));
        // single fields, set alone, land on the table's bits: (byte, value) of every non-zero byte
        fn one<M: Default>(set: impl Fn(&mut M), build: fn(&M, &mut [u8])) -> Vec<(usize, u8)> {
            let mut m = M::default();
            set(&mut m);
            let mut b = [0u8; CM_MSG_LEN];
            build(&m, &mut b);
            b.iter().enumerate().filter(|(_, x)| **x != 0).map(|(i, x)| (i, *x)).collect()
        }
        let req = |f: fn(&mut CmReq)| one(f, CmReq::build);
        let rep = |f: fn(&mut CmRep)| one(f, CmRep::build);
        assert_eq!(req(|m| m.transport_service_type = 3), vec![(43, 0b0000_0110)]);
        assert_eq!(req(|m| m.remote_cm_response_timeout = 31), vec![(43, 0b1111_1000)]);
        assert_eq!(req(|m| m.retry_count = 7), vec![(47, 0b0000_0111)]);
        assert_eq!(req(|m| m.path_mtu = 5), vec![(50, 0x50)]);
        assert_eq!(req(|m| m.rnr_retry_count = 7), vec![(50, 0x07)]);
        assert_eq!(req(|m| m.max_cm_retries = 15), vec![(51, 0xF0)]);
        assert_eq!(req(|m| m.primary_flow_label = 0xFFFFF), vec![(88, 0xFF), (89, 0xFF), (90, 0xF0)]);
        assert_eq!(req(|m| m.primary_packet_rate = 63), vec![(91, 0x3F)]);
        assert_eq!(req(|m| m.primary_subnet_local = 1), vec![(94, 0x08)]);
        assert_eq!(req(|m| m.primary_local_ack_timeout = 19), vec![(95, 19 << 3)]);
        assert_eq!(req(|m| m.sap_supported = 1), vec![(139, 0x04)]);
        assert_eq!(req(|m| m.vendor_id = 0xABCDEF), vec![(5, 0xAB), (6, 0xCD), (7, 0xEF)]);
        assert_eq!(rep(|m| m.target_ack_delay = 15), vec![(26, 15 << 3)]);
        assert_eq!(rep(|m| m.failover_accepted = 3), vec![(26, 0b110)]);
        assert_eq!(rep(|m| m.rnr_retry_count = 7), vec![(27, 0xE0)]);
        assert_eq!(rep(|m| m.srq = 1), vec![(27, 0x10)]);
        let mut b = [0u8; CM_MSG_LEN];
        CmRej { message_rejected: 1, reject_info_length: 8, reason: 28, ..Default::default() }.build(&mut b);
        assert_eq!(b[8..12], [0x40, 8 << 1, 0, 28]);
        CmMra { message_mraed: 2, service_timeout: 24, ..Default::default() }.build(&mut b);
        assert_eq!(b[8..10], [0x80, 24 << 3]);
        CmLap { alternate_flow_label: 0xFFFFF, alternate_packet_rate: 63, alternate_sl: 15, alternate_local_ack_timeout: 31, ..Default::default() }.build(&mut b);
        assert_eq!((b[56..59].to_vec(), b[61], b[62], b[63]), (vec![0xFF, 0xFF, 0xF0], 0x3F, 0xF0, 0xF8));
        CmSidrRep { vendor_id_h: 0xABCD, vendor_id_l: 0xEF, qpn: 0x123456, ..Default::default() }.build(&mut b);
        assert_eq!(b[6..12], [0xAB, 0xCD, 0x12, 0x34, 0x56, 0xEF]);
    }

    /// Every message type parses back what it built, fields and private data.
    #[test]
    fn build_and_parse_agree() {
        let mut pd = [0u8; 224];
        pd.iter_mut().enumerate().for_each(|(i, x)| *x = i as u8);
        let msgs = vec![
            CmMsg::Req(CmReq { local_comm_id: 7, service_id: service_id(RDMA_PS_TCP, 7174), local_qpn: 0x11, starting_psn: 0xABCDEF, path_mtu: 3, primary_local_ack_timeout: 19, private_data: pd[..92].try_into().unwrap(), ..Default::default() }),
            CmMsg::Mra(CmMra { local_comm_id: 1, remote_comm_id: 2, service_timeout: 24, ..Default::default() }),
            CmMsg::Rej(CmRej { remote_comm_id: 9, reason: 8, ..Default::default() }),
            CmMsg::Rep(CmRep { local_comm_id: 3, remote_comm_id: 7, local_qpn: 0x12, target_ack_delay: 15, rnr_retry_count: 7, ..Default::default() }),
            CmMsg::Rtu(CmRtu { local_comm_id: 7, remote_comm_id: 3, private_data: pd, }),
            CmMsg::Dreq(CmDreq { local_comm_id: 7, remote_comm_id: 3, remote_qpn: 0x12, ..Default::default() }),
            CmMsg::Drep(CmDrep { local_comm_id: 3, remote_comm_id: 7, ..Default::default() }),
            CmMsg::SidrReq(CmSidrReq { request_id: 5, pkey: 0xFFFF, service_id: service_id(RDMA_PS_UDP, 7174), ..Default::default() }),
            CmMsg::SidrRep(CmSidrRep { request_id: 5, qpn: 0x13, qkey: RDMA_UDP_QKEY, service_id: service_id(RDMA_PS_UDP, 7174), ..Default::default() }),
            CmMsg::Lap(CmLap { local_comm_id: 7, remote_qpn: 0x12, alternate_hop_limit: 64, ..Default::default() }),
            CmMsg::Apr(CmApr { local_comm_id: 3, remote_comm_id: 7, ap_status: 2, ..Default::default() }),
        ];
        for m in msgs {
            let b = m.mad(0x2_0000_0001);
            let p = Mad::parse(&b).unwrap();
            assert!(p.hdr.is_cm());
            assert_eq!((p.hdr.tid, p.hdr.attr_id), (0x2_0000_0001, m.attr_id()));
            assert_eq!(p.cm.as_ref(), Some(&m), "{}", m.name());
        }
        let c = CmaHdr::v4(Ipv4Addr::new(10, 0, 0, 2), 0x9abc, Ipv4Addr::new(10, 0, 0, 1));
        let mut b = [0u8; 36];
        c.build(&mut b);
        assert_eq!(b[1], 0x40);
        assert_eq!(CmaHdr::parse(&b).unwrap(), c);
        assert_eq!(c.v4_addrs(), Some((Ipv4Addr::new(10, 0, 0, 2), Ipv4Addr::new(10, 0, 0, 1))));
        assert_eq!(Mad::parse(&[0u8; 255]).map(|_| ()), Err(MadError::Truncated { what: "MAD", need: 256, have: 255 }));
    }
}
