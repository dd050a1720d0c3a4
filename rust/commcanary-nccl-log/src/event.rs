//! NCCL profiler ABI facts: event type bits and event states.
//!
//! Types are bits of the activation mask (`ncclProfileGroup = 1 << 0` …
//! `ncclProfileCeBatch = 1 << 14`, the last three from ABI v6). States are the
//! values of `ncclProfilerEventState_t` (v4 onwards).

/// Event types: the bit index of each `ncclProfile*` mask bit.
pub mod kind {
    /// `ncclProfileGroup`
    pub const GROUP: u8 = 0;
    /// `ncclProfileColl`
    pub const COLL: u8 = 1;
    /// `ncclProfileP2p`
    pub const P2P: u8 = 2;
    /// `ncclProfileProxyOp`
    pub const PROXY_OP: u8 = 3;
    /// `ncclProfileProxyStep`
    pub const PROXY_STEP: u8 = 4;
    /// `ncclProfileProxyCtrl`
    pub const PROXY_CTRL: u8 = 5;
    /// `ncclProfileKernelCh`
    pub const KERNEL_CH: u8 = 6;
    /// `ncclProfileNetPlugin`
    pub const NET_PLUGIN: u8 = 7;
    /// `ncclProfileGroupApi` (v5)
    pub const GROUP_API: u8 = 8;
    /// `ncclProfileCollApi` (v5)
    pub const COLL_API: u8 = 9;
    /// `ncclProfileP2pApi` (v5)
    pub const P2P_API: u8 = 10;
    /// `ncclProfileKernelLaunch` (v5)
    pub const KERNEL_LAUNCH: u8 = 11;
    /// `ncclProfileCeColl` (v6)
    pub const CE_COLL: u8 = 12;
    /// `ncclProfileCeSync` (v6)
    pub const CE_SYNC: u8 = 13;
    /// `ncclProfileCeBatch` (v6)
    pub const CE_BATCH: u8 = 14;
    /// One past the last type.
    pub const COUNT: u8 = 15;
}

/// The names `COMMCANARY_NCCL_EVENTS` accepts, by type bit (NCCL's own
/// spelling without `ncclProfile`, lower-cased).
pub const NAMES: [&str; kind::COUNT as usize] = [
    "group",
    "coll",
    "p2p",
    "proxyop",
    "proxystep",
    "proxyctrl",
    "kernelch",
    "netplugin",
    "groupapi",
    "collapi",
    "p2papi",
    "kernellaunch",
    "cecoll",
    "cesync",
    "cebatch",
];

/// The mask when `COMMCANARY_NCCL_EVENTS` is unset: the group API, groups,
/// collectives and p2p, and kernel channels (the GPU's own stamps).
pub const DEFAULT_MASK: u32 = (1 << kind::GROUP_API)
    | (1 << kind::GROUP)
    | (1 << kind::COLL)
    | (1 << kind::P2P)
    | (1 << kind::KERNEL_CH);

/// The type bit of an ABI `type` value (a single mask bit), if it is one.
#[must_use]
pub fn kind_of(type_value: u64) -> Option<u8> {
    if type_value.is_power_of_two() && type_value < (1 << kind::COUNT) {
        Some(type_value.trailing_zeros() as u8)
    } else {
        None
    }
}

/// Parses `COMMCANARY_NCCL_EVENTS`: `default`, `all`, a number (decimal or
/// `0x` hex), or names joined by `,` (each may be prefixed by `+` or `-` to
/// add to or take from the default).
///
/// # Errors
/// The first word that is none of these.
pub fn parse_mask(text: &str) -> Result<u32, String> {
    let text = text.trim();
    let all = (1u32 << kind::COUNT) - 1;
    if text.is_empty() || text.eq_ignore_ascii_case("default") {
        return Ok(DEFAULT_MASK);
    }
    if text.eq_ignore_ascii_case("all") {
        return Ok(all);
    }
    let number = text
        .strip_prefix("0x")
        .map_or_else(|| text.parse::<u32>(), |hex| u32::from_str_radix(hex, 16));
    if let Ok(n) = number {
        return Ok(n & all);
    }
    let relative = text.starts_with('+') || text.starts_with('-');
    let mut mask = if relative { DEFAULT_MASK } else { 0 };
    for word in text.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        let (sign, name) = match word.as_bytes()[0] {
            b'+' => (1, &word[1..]),
            b'-' => (-1, &word[1..]),
            _ => (1, word),
        };
        let Some(bit) = NAMES.iter().position(|n| n.eq_ignore_ascii_case(name)) else {
            return Err(format!(
                "unknown event type '{name}' (known: {})",
                NAMES.join(", ")
            ));
        };
        if sign > 0 {
            mask |= 1 << bit;
        } else {
            mask &= !(1 << bit);
        }
    }
    Ok(mask)
}

/// Event states (`ncclProfilerEventState_t`, v4 onwards).
pub mod state {
    /// `ncclProfilerProxyStepSendGPUWait`
    pub const PROXY_STEP_SEND_GPU_WAIT: u8 = 8;
    /// `ncclProfilerProxyStepSendWait`
    pub const PROXY_STEP_SEND_WAIT: u8 = 9;
    /// `ncclProfilerProxyStepRecvWait`
    pub const PROXY_STEP_RECV_WAIT: u8 = 10;
    /// `ncclProfilerProxyStepRecvFlushWait`
    pub const PROXY_STEP_RECV_FLUSH_WAIT: u8 = 11;
    /// `ncclProfilerProxyStepRecvGPUWait`
    pub const PROXY_STEP_RECV_GPU_WAIT: u8 = 12;
    /// `ncclProfilerProxyCtrlIdle`
    pub const PROXY_CTRL_IDLE: u8 = 13;
    /// `ncclProfilerProxyCtrlAppendEnd`
    pub const PROXY_CTRL_APPEND_END: u8 = 18;
    /// `ncclProfilerProxyOpInProgress_v4`
    pub const PROXY_OP_IN_PROGRESS: u8 = 19;
    /// `ncclProfilerProxyStepSendPeerWait_v4`
    pub const PROXY_STEP_SEND_PEER_WAIT: u8 = 20;
    /// `ncclProfilerNetPluginUpdate`
    pub const NET_PLUGIN_UPDATE: u8 = 21;
    /// `ncclProfilerKernelChStop`: the channel's GPU stop stamp.
    pub const KERNEL_CH_STOP: u8 = 22;
    /// `ncclProfilerGroupStartApiStop`
    pub const GROUP_START_API_STOP: u8 = 23;
    /// `ncclProfilerGroupEndApiStart`
    pub const GROUP_END_API_START: u8 = 24;
    /// `ncclProfilerCeCollStart` (v6)
    pub const CE_COLL_START: u8 = 25;
    /// `ncclProfilerCeBatchComplete` (v6), the last state.
    pub const CE_BATCH_COMPLETE: u8 = 30;
    /// One past the last state.
    pub const COUNT: u8 = 31;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_parse_by_name_number_and_difference() {
        assert_eq!(parse_mask("").unwrap(), DEFAULT_MASK);
        assert_eq!(parse_mask("coll,p2p").unwrap(), 0b110);
        assert_eq!(parse_mask("0x6").unwrap(), 0b110);
        assert_eq!(parse_mask("all").unwrap(), 0x7fff);
        assert_eq!(parse_mask("+proxystep").unwrap(), DEFAULT_MASK | 1 << 4);
        assert_eq!(parse_mask("-kernelch").unwrap(), DEFAULT_MASK & !(1 << 6));
        assert!(parse_mask("coll,bogus").unwrap_err().contains("bogus"));
        assert_eq!(kind_of(1 << 12), Some(kind::CE_COLL));
        assert_eq!(kind_of(3), None);
        assert_eq!(kind_of(1 << 15), None);
    }
}
