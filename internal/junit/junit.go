// Package junit writes JUnit XML, the test report format CI servers
// display: suites of cases, each passed, failed, in error or skipped.
// The counts on the suites and on the report are computed from the
// cases, so they always agree with them.
package junit

import (
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
)

// Suite is one group of test cases.
type Suite struct {
	Name  string
	Cases []Case
}

// Case is one test case; at most one of Failure, Error and Skipped is set.
type Case struct {
	Name      string
	Classname string
	Seconds   float64
	Failure   *Problem // it ran and did not pass
	Error     *Problem // it could not run to the end
	Skipped   string   // why it did not run, when it did not
	Output    string   // shown beside the case (system-out)
}

// Problem is why a case failed or erred: a one-line message, a type and
// the full text.
type Problem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

type xmlReport struct {
	XMLName xml.Name   `xml:"testsuites"`
	Tests   int        `xml:"tests,attr"`
	Fails   int        `xml:"failures,attr"`
	Errors  int        `xml:"errors,attr"`
	Skips   int        `xml:"skipped,attr"`
	Suites  []xmlSuite `xml:"testsuite"`
}

type xmlSuite struct {
	Name   string    `xml:"name,attr"`
	Tests  int       `xml:"tests,attr"`
	Fails  int       `xml:"failures,attr"`
	Errors int       `xml:"errors,attr"`
	Skips  int       `xml:"skipped,attr"`
	Time   string    `xml:"time,attr"`
	Cases  []xmlCase `xml:"testcase"`
}

type xmlCase struct {
	Name      string      `xml:"name,attr"`
	Classname string      `xml:"classname,attr"`
	Time      string      `xml:"time,attr"`
	Failure   *Problem    `xml:"failure,omitempty"`
	Error     *Problem    `xml:"error,omitempty"`
	Skipped   *xmlSkipped `xml:"skipped,omitempty"`
	Output    string      `xml:"system-out,omitempty"`
}

type xmlSkipped struct {
	Message string `xml:"message,attr"`
}

// timeAttr is seconds to the millisecond, as JUnit readers show them
// ("0.072"), where a float's own digits would carry its binary noise
// (0.07195900000000001).
func timeAttr(seconds float64) string {
	return strconv.FormatFloat(seconds, 'f', 3, 64)
}

// Write writes suites as one JUnit XML document.
func Write(w io.Writer, suites []Suite) error {
	out := xmlReport{}
	for _, s := range suites {
		xs := xmlSuite{Name: s.Name}
		seconds := 0.0
		for _, c := range s.Cases {
			xc := xmlCase{Name: c.Name, Classname: c.Classname, Time: timeAttr(c.Seconds), Failure: c.Failure, Error: c.Error, Output: c.Output}
			switch {
			case c.Failure != nil:
				xs.Fails++
			case c.Error != nil:
				xs.Errors++
			case c.Skipped != "":
				xc.Skipped = &xmlSkipped{Message: c.Skipped}
				xs.Skips++
			}
			xs.Tests++
			seconds += c.Seconds
			xs.Cases = append(xs.Cases, xc)
		}
		xs.Time = timeAttr(seconds)
		out.Tests, out.Fails, out.Errors, out.Skips = out.Tests+xs.Tests, out.Fails+xs.Fails, out.Errors+xs.Errors, out.Skips+xs.Skips
		out.Suites = append(out.Suites, xs)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return fmt.Errorf("writing a JUnit report: %w", err)
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("writing a JUnit report: %w", err)
	}
	_, err := io.WriteString(w, "\n")
	return err
}
