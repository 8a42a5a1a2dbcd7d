def max_min(flows: dict[Flow, None]) -> dict[Flow, float]:
    """Weighted max-min fair rates of ``flows`` (a whole component: every flow on their links is in
    it), by progressive filling: raise the rate of every unfrozen flow together; the next event is
    a link filling up (its unfrozen flows freeze at that level) or a flow's cap (it freezes there)."""
    rates: dict[Flow, float] = {}
    left: dict[Link, float] = {}  # capacity not taken by frozen flows
    active_w: dict[Link, float] = {}  # weight of the unfrozen flows
    for flow in flows:
        for link in flow.links:
            if link not in left:
                left[link] = link.capacity
                active_w[link] = link.weight
    active = dict(flows)
    capped = sorted((f.cap, i, f) for i, f in enumerate(flows) if f.cap < math.inf)
    next_cap = 0  # capped[next_cap:] holds the caps of flows that may still be active
    while active:
        level, full = math.inf, []
        for link, w in active_w.items():
            if w > 0:
                t = left[link] / w
                if t < level * (1 - 1e-12):
                    level, full = t, [link]
                elif t <= level * (1 + 1e-12):
                    full.append(link)
        while next_cap < len(capped) and capped[next_cap][2] not in active:
            next_cap += 1
        cap = capped[next_cap][0] if next_cap < len(capped) else math.inf
        if cap <= level:
            level, full = cap, []
        if level == math.inf:  # flows on no finite link, uncapped: done at once
            rates.update(dict.fromkeys(active, math.inf))
            break
        frozen = {f: None for f in active if f.cap <= level * (1 + 1e-12)} if cap <= level * (1 + 1e-12) else {}
        for link in full:
            frozen.update(dict.fromkeys(f for f in link.flows if f in active))
        if len(frozen) == len(active):  # the last level (often the only one): no bookkeeping left to do
            rates.update((f, min(level, f.cap)) for f in frozen)
            break
        for flow in frozen:
            rate = min(level, flow.cap)
            rates[flow] = rate
            del active[flow]
            for link in flow.links:
                w = link.flows[flow]
                left[link] = max(0.0, left[link] - w * rate)
                active_w[link] -= w
        for link in full:
            del active_w[link]  # full: its flows are frozen
    return rates
