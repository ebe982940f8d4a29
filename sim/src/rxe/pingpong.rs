//! ibv_rc_pingpong peer (in progress).
