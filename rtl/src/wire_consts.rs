//! Wire constants the RTL uses (temporary home until the golden wire model exports them).
pub const ETHERTYPE_VLAN: u16 = 0x8100;
pub const ETHERTYPE_IPV6: u16 = 0x86DD;
