pub mod crc;
pub mod wire;
