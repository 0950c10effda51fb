package bench

// simPipeline builds the timeline of an idealised pipeline over denoising steps: nranks
// stages splitting totalSteps evenly, nsamples samples in flight, each step taking stepNS,
// each hand-off taking commNS (a send on the sender overlapping a recv on the receiver),
// and a decode of decodeNS on the last rank. It returns the events, the stage ranges and
// the completion time (end of decode) of every sample. Times start at t0.
func simPipeline(t0 int64, nranks, totalSteps, nsamples int, stepNS, commNS, decodeNS int64) ([]Event, [][2]int, []int64) {
	stages := make([][2]int, nranks)
	for r := range nranks {
		stages[r] = [2]int{r * totalSteps / nranks, (r + 1) * totalSteps / nranks}
	}
	free := make([]int64, nranks) // when each rank is next free
	for r := range free {
		free[r] = t0
	}
	var events []Event
	completions := make([]int64, nsamples)
	for s := range nsamples {
		ready := t0 // when the sample's input is available on the current rank
		for r := range nranks {
			st := stages[r]
			if r > 0 {
				// recv from r-1: overlaps the send.
				recvStart := max(ready, free[r])
				if free[r] < ready {
					events = append(events, Event{Rank: r, Kind: KindWait, Sample: int64(s), Start: free[r], End: ready})
				}
				events = append(events,
					Event{Rank: r - 1, Kind: KindSend, Sample: int64(s), Step0: st[0], Step1: st[0], Start: recvStart, End: recvStart + commNS},
					Event{Rank: r, Kind: KindRecv, Sample: int64(s), Step0: st[0], Step1: st[0], Start: recvStart, End: recvStart + commNS})
				ready = recvStart + commNS
			}
			start := max(ready, free[r])
			end := start + int64(st[1]-st[0])*stepNS
			events = append(events, Event{Rank: r, Kind: KindCompute, Sample: int64(s), Step0: st[0], Step1: st[1], Start: start, End: end})
			free[r] = end
			ready = end
		}
		last := nranks - 1
		start := max(ready, free[last])
		events = append(events, Event{Rank: last, Kind: KindDecode, Sample: int64(s), Start: start, End: start + decodeNS})
		free[last] = start + decodeNS
		completions[s] = start + decodeNS
	}
	return events, stages, completions
}
