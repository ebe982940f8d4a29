//! perftest peer (in progress).
