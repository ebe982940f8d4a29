//! Timer values (rxe `rxe_qp.c` `qp_timeout_jiffies`, `rxe_comp.c` `rnrnak_usec`).

use crate::wire::headers::{AETH_VALUE_MASK, RNR_TIMER_USEC};

/// Local ACK timeout: 4.096 us * 2^timeout; `None` for timeout 0 (rxe: no retransmit timer at all).
pub fn retransmit_timeout_ns(timeout: u8) -> Option<u64> {
    match timeout {
        0 => None,
        t => Some(4096u64 << t.min(31)),
    }
}

/// RNR NAK wait for a 5-bit timer code, from the IBA table (rxe `rnrnak_usec`).
pub fn rnr_timeout_ns(code: u8) -> u64 {
    u64::from(RNR_TIMER_USEC[(code & AETH_VALUE_MASK) as usize]) * 1000
}

/// The earlier of two optional deadlines.
pub fn earliest(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values() {
        assert_eq!(retransmit_timeout_ns(0), None);
        assert_eq!(retransmit_timeout_ns(1), Some(8192));
        assert_eq!(retransmit_timeout_ns(14), Some(67_108_864));
        assert_eq!(rnr_timeout_ns(12), 640_000);
        assert_eq!(rnr_timeout_ns(0), 655_360_000);
    }
}
