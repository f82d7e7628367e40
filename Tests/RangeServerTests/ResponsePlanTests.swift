import XCTest

@testable import RangeServer

final class ResponsePlanTests: XCTestCase {
    private let context = ResponsePlan.Context(method: "GET", date: "Mon, 01 Jan 2024 00:00:00 GMT")

    func testPagesWithoutBodies() {
        XCTAssertEqual(ResponsePlan.page(204, context).body, [])
        XCTAssertNil(ResponsePlan.page(304, context).field("content-length"))
        var head = context
        head.method = "HEAD"
        let plan = ResponsePlan.plan(head, resource: .data([1]), fault: .status(503, retryAfter: 5))
        XCTAssertEqual(plan.body, [])
        XCTAssertEqual(plan.field("retry-after"), "5")
        XCTAssertEqual(plan.field("content-length"), String(ResponsePlan.page(503, context).bodyLength))
    }

    func testSerializedHead() {
        var closing = context
        closing.keepAlive = false
        let head = String(decoding: ResponsePlan.page(404, closing).serializedHead, as: UTF8.self)
        XCTAssertTrue(head.hasPrefix("HTTP/1.1 404 Not Found\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\n"))
        XCTAssertTrue(head.hasSuffix("Connection: close\r\n\r\n"))
    }

    func testEndingsOfBodyFaults() {
        var ranged = context
        ranged.rangeHeader = "bytes=0-99"
        let resource = Resource.generated(size: 1000)
        XCTAssertEqual(ResponsePlan.plan(ranged, resource: resource, fault: .cutAfter(5000)).ending, .cut(after: 100))
        XCTAssertEqual(ResponsePlan.plan(ranged, resource: resource, fault: .stallAfter(10)).ending, .stall(after: 10))
        XCTAssertEqual(ResponsePlan.plan(ranged, resource: nil, fault: nil).status, 404)
        XCTAssertEqual(ResponsePlan.plan(ranged, resource: resource, fault: .headHang).ending, .hang)
    }
}
