// Sortable tables: each header of a table.sortable becomes a button; without JavaScript the
// static table (in the order the report wrote it) is what shows.
document.querySelectorAll("table.sortable").forEach(function (table) {
  var body = table.tBodies[0];
  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
    var button = document.createElement("button");
    button.type = "button";
    button.textContent = th.textContent;
    th.textContent = "";
    th.appendChild(button);
    button.addEventListener("click", function () {
      var up = th.getAttribute("aria-sort") !== "ascending";
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", up ? "ascending" : "descending");
      var numeric = th.classList.contains("num");
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = a.cells[col].getAttribute("data-v"), y = b.cells[col].getAttribute("data-v");
        if (x === "" || y === "") { return (x === "") - (y === ""); }  // missing values last
        var d = numeric ? parseFloat(x) - parseFloat(y) : x.localeCompare(y);
        return up ? d : -d;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
