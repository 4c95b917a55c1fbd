"""How long compute takes: FLOPs/bytes (from `lumos.converters.ops`) → time on a GPU.

`roofline` prices one op with measured efficiency (from `lumos.hwconfigs`); `estimate`
fills durations a trace does not have. The what-if edits and the workload generator price
through here too, so one model serves every path.
"""
