package runner

import (
	"fmt"
	"os"
	"sync"
)

// tailKeep is how much of the end of an over-cap log is kept: errors and
// summaries come last.
const tailKeep = 1 << 20

// logSink writes an execution's output to its log files: output.log holds
// both streams in the order they arrived, stderr.log holds stderr alone.
// Each keeps at most cap bytes from the start; past that, output.log keeps a
// rolling tail that is appended, after a marker saying how much was dropped,
// when the execution ends.
type logSink struct {
	mu      sync.Mutex
	out     *os.File
	errf    *os.File
	cap     int64
	written int64 // bytes in output.log
	errSize int64 // bytes in stderr.log
	dropped int64 // bytes of output not in the head
	ring    []byte
	ringPos int
	ringLen int
	closed  bool
	changed chan struct{} // closed and replaced on every write
	err     error
}

func newLogSink(dir string, cap int64) (*logSink, error) {
	out, err := os.OpenFile(dir+"/output.log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	errf, err := os.OpenFile(dir+"/stderr.log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		out.Close()
		return nil, err
	}
	return &logSink{out: out, errf: errf, cap: cap, changed: make(chan struct{})}, nil
}

// Write implements Output.
func (s *logSink) Write(st Stream, p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if st == Stderr && s.errSize < s.cap {
		n := min(int64(len(p)), s.cap-s.errSize)
		if _, err := s.errf.Write(p[:n]); err != nil && s.err == nil {
			s.err = err
		}
		s.errSize += n
	}
	head := min(int64(len(p)), max(s.cap-s.written, 0))
	if head > 0 {
		if _, err := s.out.Write(p[:head]); err != nil && s.err == nil {
			s.err = err
		}
		s.written += head
	}
	if rest := p[head:]; len(rest) > 0 {
		s.dropped += int64(len(rest))
		s.keepTail(rest)
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *logSink) keepTail(p []byte) {
	if s.ring == nil {
		s.ring = make([]byte, tailKeep)
	}
	if len(p) >= len(s.ring) {
		copy(s.ring, p[len(p)-len(s.ring):])
		s.ringPos, s.ringLen = 0, len(s.ring)
		return
	}
	for len(p) > 0 {
		n := copy(s.ring[s.ringPos:], p)
		p = p[n:]
		s.ringPos = (s.ringPos + n) % len(s.ring)
		s.ringLen = min(s.ringLen+n, len(s.ring))
	}
}

// state returns the log's size and a channel closed at the next write.
func (s *logSink) state() (size int64, changed <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.written, s.changed
}

// close appends the dropped-output marker and the kept tail, and closes the
// files. It returns the final sizes.
func (s *logSink) close() (size, stderrSize, dropped int64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return s.written, s.errSize, s.dropped, s.err
	}
	s.closed = true
	if s.dropped > 0 {
		var tail []byte
		if s.ringLen == len(s.ring) {
			tail = append(append(tail, s.ring[s.ringPos:]...), s.ring[:s.ringPos]...)
		} else {
			tail = s.ring[:s.ringLen]
		}
		marker := fmt.Sprintf("\n[scimcp: the output passed the log cap of %d bytes; %d bytes after it were dropped; the last %d bytes follow]\n",
			s.cap, s.dropped-int64(len(tail)), len(tail))
		n1, _ := s.out.WriteString(marker)
		n2, _ := s.out.Write(tail)
		s.written += int64(n1 + n2)
	}
	if err := s.out.Sync(); err != nil && s.err == nil {
		s.err = err
	}
	s.out.Close()
	s.errf.Close()
	close(s.changed)
	s.changed = make(chan struct{})
	return s.written, s.errSize, s.dropped, s.err
}
