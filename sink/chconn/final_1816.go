package chconn

// FinalVersion is what a SELECT … FINAL adds to its columns. Through a
// Distributed table over several shards, 18.16 fails a FINAL read that
// does not select the version column ("Cannot find column version in
// source stream"), so in cluster mode such a read selects it; on a single
// server the statement stays as the first release wrote it.
func (n Names) FinalVersion() string {
	if !n.Clustered() {
		return ""
	}
	return ", version"
}
