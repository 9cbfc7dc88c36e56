package repack

// SetCodedHook makes f see each coding before it is checked, until the
// returned function puts the default back.
func SetCodedHook(f func(stored []byte)) (restore func()) {
	old := testHookCoded
	testHookCoded = f
	return func() { testHookCoded = old }
}
